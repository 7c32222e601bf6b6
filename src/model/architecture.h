#pragma once
// What tells one decoder family from another, as llama.cpp reads and runs
// it: one row per architecture (general.architecture), read by the config,
// the GGUF reader and writer, the training passes and the decoder. A new
// family that differs only in these traits is one row.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::model {

// How RoPE pairs a head's dimensions (ggml's rope modes).
enum class RopeLayout {
  kAdjacentPairs,  // (x[2i], x[2i+1]): mode 0, LLM_ARCH_LLAMA
  kHalves,  // (x[i], x[i + d/2]): NeoX, mode 2 (qwen2, qwen3, gemma3)
};

// The gate's activation in the gated feed-forward act = f(gate) * up.
enum class FfnActivation {
  kSilu,  // SwiGLU (llama.cpp LLM_FFN_SILU)
  kGeluTanh,  // GeGLU with GELU's tanh approximation (LLM_FFN_GELU, HF gelu_pytorch_tanh)
};

// What a block computes between its first norm and the first residual add.
enum class Mixer {
  kAttention,
  kShortConv,  // LFM2's double-gated short convolution (kernels/short_conv.h)
  kGatedDeltaNet,  // Qwen3.5's linear attention (kernels/gated_deltanet.h)
};

// What a block's feed-forward half is.
enum class FeedForward {
  kDense,  // one gated feed-forward (ffn_gate, ffn_up, ffn_down)
  // A mixture of experts: a router (ffn_gate_inp) scores the experts by a
  // softmax, each token runs the <arch>.expert_used_count best (ties to the
  // lower index) and sums their gated feed-forwards (ffn_{gate,up,down}_exps,
  // one matrix per expert) weighted by their probabilities.
  kExperts,
};

// One row per family; a field left out takes the default here, so a row
// states only how its family differs from llama.
struct Architecture {
  const char* name = "";  // general.architecture, and the prefix of its keys ("qwen3.block_count")
  RopeLayout rope = RopeLayout::kAdjacentPairs;
  // An RMS norm over each query and each key head, after the projection and
  // before RoPE, with weights blk.N.attn_q_norm / attn_k_norm [head size].
  bool qk_norm = false;
  // With qk_norm: one norm over each token's whole query and whole key row
  // instead (weights [q_dim] and [kv_dim]; OLMoE).
  bool qk_norm_whole = false;
  // Biases on the query, key and value projections (blk.N.attn_q.bias, ...).
  bool qkv_bias = false;
  // The converter writes <arch>.attention.key_length / value_length.
  bool writes_head_size = false;
  FfnActivation ffn_activation = FfnActivation::kSilu;
  // RMS norms of each block's attention output and feed-forward output
  // before they join the residual stream (blk.N.post_attention_norm,
  // blk.N.post_ffw_norm).
  bool post_norms = false;
  // The token embedding is multiplied by sqrt(d_model) on the way in (not on
  // the way out when the head is tied).
  bool embedding_scale = false;
  // Sliding-window attention on some layers (<arch>.attention.sliding_window
  // > 0): layer l is local unless l % pattern == pattern - 1, as llama.cpp's
  // set_swa_pattern; local layers use their own RoPE base and no RoPE
  // scaling. 0: the family has no local layers.
  int64_t default_swa_pattern = 0;
  // Layers without RoPE ("NoPE"): layer l attends by content alone when
  // (l + 1) % no_rope_layer_step == 0. llama.cpp fixes the step per family
  // (smollm3: 4) and reads no key for it. 0: every layer rotates.
  int64_t no_rope_layer_step = 0;
  // The mixer of the layers that do not attend (Config::attention_layers
  // lists those that do); kAttention: every layer attends. LFM2 marks its
  // convolution layers by a per-layer <arch>.attention.head_count_kv of 0
  // and writes the kernel width as <arch>.shortconv.l_cache; Qwen3.5 writes
  // <arch>.full_attention_interval (or attention.recurrent_layers) and the
  // <arch>.ssm.* sizes.
  Mixer recurrent_mixer = Mixer::kAttention;
  // The final norm's tensor: "output_norm.weight", or LFM2's
  // "token_embd_norm.weight" (llama.cpp's LLM_TENSOR_OUTPUT_NORM_LFM2).
  const char* output_norm = "output_norm.weight";
  // The feed-forward half's input norm: "ffn_norm", or Qwen3.5's
  // "post_attention_norm" (the converter's name for the same norm).
  const char* ffn_norm = "ffn_norm";
  // Gated attention (Qwen3.5): attn_q yields per head [query | gate], and
  // the attention output is multiplied by sigmoid(gate) before attn_output.
  bool attn_output_gate = false;
  // RoPE may rotate only the first <arch>.rope.dimension_count dimensions of
  // each head (Qwen3.5: a quarter); llama.cpp asserts the whole head for
  // the other families.
  bool partial_rope = false;
  FeedForward feed_forward = FeedForward::kDense;
  // kExperts: whether the chosen experts' probabilities are divided by their
  // sum (llama.cpp's norm_w; Qwen3-MoE yes, OLMoE no).
  bool renormalize_expert_weights = false;
  // kExperts: the experts' width is <arch>.expert_feed_forward_length (else
  // feed_forward_length / expert_used_count, as llama.cpp's qwen3moe loader
  // falls back); false: feed_forward_length is the experts' width (OLMoE).
  bool expert_width_key = false;
  // kExperts: the load-balancing loss's default weight in training (the
  // family's router_aux_loss_coef).
  double router_aux_loss_coef = 0;
  // kExperts: a shared expert beside the routed ones, a gated feed-forward
  // every token runs (ffn_{gate,up,down}_shexp, <arch>.expert_shared_feed_forward_length
  // wide), scaled by sigmoid(ffn_gate_inp_shexp . h) (Qwen3-Next, Qwen3.5-MoE).
  bool shared_expert = false;
  const char* doc = "";  // what a user knows it as
  bool has_recurrent_layers() const { return recurrent_mixer != Mixer::kAttention; }
  bool has_experts() const { return feed_forward == FeedForward::kExperts; }
};

const std::vector<Architecture>& architectures();
// The row called `name`, or null.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen3", for messages.
std::string architecture_names();

}  // namespace ggtrain::model
