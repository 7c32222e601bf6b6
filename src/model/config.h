#pragma once
// Shape and numerics of a decoder of one of model/architecture.h's families,
// as stored in its GGUF metadata (<arch>.* keys).
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "gguf/types.h"
#include "model/architecture.h"

namespace ggtrain::gguf {
class GgufFile;
}

namespace ggtrain::model {

// The local layers' RoPE base llama.cpp assumes when a file has no
// <arch>.rope.freq_base_swa (llama_hparams::rope_freq_base_train_swa).
inline constexpr double kDefaultRopeBaseSwa = 10000.0;

struct Config {
  std::string arch = "llama";  // general.architecture: a row of architectures()
  int64_t vocab = 0;
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t d_ff = 0;
  int64_t ctx = 0;  // maximum sequence length
  // Size of each attention head; 0: d_model / n_heads. Qwen3 has other sizes
  // (<arch>.attention.key_length).
  int64_t head_dim = 0;
  bool tied = false;
  double rope_freq_base = 10000.0;
  double rms_eps = 1e-5;
  // Linear RoPE scaling (<arch>.rope.scaling.factor, type "linear"): every
  // position divided by it on the global layers. 1: none.
  double rope_scaling_factor = 1.0;
  // Sliding-window attention (families with Architecture::default_swa_pattern):
  // the local layers (is_local_layer) see only the last sliding_window
  // positions, themselves included, and rotate with rope_freq_base_swa.
  // 0: every layer is global.
  int64_t sliding_window = 0;
  int64_t swa_pattern = 6;  // every swa_pattern-th layer is global; 0: all local
  double rope_freq_base_swa = kDefaultRopeBaseSwa;
  // Families with recurrent layers (Architecture::recurrent_mixer: LFM2,
  // Qwen3.5): the layers that attend, as ascending indices "2,5,8"; every
  // other layer is the family's recurrent mixer. Empty: every layer attends.
  std::string attention_layers;
  int64_t shortconv_l_cache = 3;  // LFM2: the short convolutions' taps
  // Qwen3.5's Gated DeltaNet layers (GGUF <arch>.ssm.*): the convolution's
  // taps (conv_kernel), the key and value head size (state_size), the key
  // heads (group_count) and the value heads (time_step_rank).
  int64_t ssm_conv_kernel = 4;
  int64_t ssm_state_size = 128;
  int64_t ssm_group_count = 16;
  int64_t ssm_time_step_rank = 16;
  // The dimensions of each head that RoPE rotates (<arch>.rope.dimension_count,
  // Architecture::partial_rope); 0: the whole head.
  int64_t rope_dim = 0;
  // Mixture-of-experts families (Architecture::has_experts): the experts
  // (<arch>.expert_count), how many each token runs (expert_used_count) and
  // their width (expert_feed_forward_length where the family reads it;
  // 0: d_ff, which is then the experts' width).
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t d_ff_expert = 0;
  // Architecture::shared_expert: the shared expert's width
  // (<arch>.expert_shared_feed_forward_length; 0: d_ff, as llama.cpp falls back).
  int64_t d_ff_shared = 0;
  // Llama 3.x RoPE scaling as its GGUF stores it: the tensor
  // rope_freqs.weight [d_head/2], pair i's angle divided by factor i. Empty:
  // plain RoPE. Not a config key: it comes with init.from's file and is
  // written into every checkpoint and export of that model.
  std::vector<float> rope_freq_factors;
  const float* rope_factors_or_null() const { return rope_freq_factors.empty() ? nullptr : rope_freq_factors.data(); }
  // Multi-token-prediction blocks (<arch>.nextn_predict_layers): the
  // converter writes them as blocks n_layers .. n_layers + n_nextn - 1 and
  // counts them in block_count; llama.cpp's model skips them (they serve
  // its speculative drafting). ggtrain neither runs nor trains them: like
  // rope_freq_factors they come with init.from's file, and their tensors go
  // into every checkpoint and export of that model exactly as stored.
  struct CarriedTensor {
    std::string name;  // "blk.24.nextn.eh_proj.weight"
    gguf::TensorType type;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> bytes;
  };
  int64_t n_nextn = 0;
  std::shared_ptr<const std::vector<CarriedTensor>> nextn_tensors;  // null when n_nextn is 0
  // Warm start (init.donor): > 0 means token_embd is not a parameter but a
  // frozen donor table E [vocab, donor_dim] seen through the trainable lens
  // `lens.proj.weight` W [d_model, donor_dim]: x = W E[token]. Training-time
  // only; checkpoints fold W into a standard token_embd (model/donor.h).
  int64_t donor_dim = 0;
  // LoRA (train.lora, rank > 0): each target matrix W of every block gets
  // W + (alpha / rank) B A, with A [rank, in] and B [out, rank] the tensors
  // "<W's name>.lora_a" / ".lora_b" (llama.cpp's adapter names), laid out
  // after all base tensors. Training-time only, like donor_dim.
  struct Lora {
    int64_t rank = 0;
    double alpha = 0;
    std::vector<std::string> targets;  // attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down
    double scale() const { return rank > 0 ? alpha / double(rank) : 0.0; }
  } lora;

  // The plain model a LoRA run adapts: this config without its LoRA tensors.
  Config without_lora() const {
    Config c = *this;
    c.lora = {};
    return c;
  }

  const Architecture& architecture() const;  // throws for an unknown arch
  // "<arch>.<key>": the metadata key of this model's family.
  std::string key(const char* name) const { return arch + "." + name; }
  int64_t d_head() const { return head_dim > 0 ? head_dim : d_model / n_heads; }
  int64_t q_dim() const { return n_heads * d_head(); }
  int64_t kv_dim() const { return n_kv_heads * d_head(); }
  int64_t n_rot() const { return rope_dim > 0 ? rope_dim : d_head(); }
  // attn_q's rows: the queries, and with Architecture::attn_output_gate as
  // many gate values, per head [query | gate].
  int64_t q_proj_dim() const { return architecture().attn_output_gate ? 2 * q_dim() : q_dim(); }
  // A Gated DeltaNet layer's sizes (kernels/gated_deltanet.h's GdnShape).
  int64_t ssm_key_dim() const { return ssm_group_count * ssm_state_size; }
  int64_t ssm_value_dim() const { return ssm_time_step_rank * ssm_state_size; }
  int64_t ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_value_dim(); }
  // The width of each expert's feed-forward (has_experts()).
  int64_t expert_ff() const { return d_ff_expert > 0 ? d_ff_expert : d_ff; }
  int64_t shared_ff() const { return d_ff_shared > 0 ? d_ff_shared : d_ff; }
  bool has_shared_expert() const { return architecture().shared_expert; }
  bool has_experts() const { return architecture().has_experts(); }
  // The width of a query or key head norm's weights: a head, or the whole
  // row (Architecture::qk_norm_whole).
  int64_t q_norm_dim() const { return architecture().qk_norm_whole ? q_dim() : d_head(); }
  int64_t k_norm_dim() const { return architecture().qk_norm_whole ? kv_dim() : d_head(); }
  // The RoPE of a global or a local layer: llama.cpp rotates local layers
  // with their own base and without scaling.
  struct Rope {
    double base;
    const float* freq_factors;  // null: none
    double linear_factor;
  };
  Rope rope(bool local) const {
    if (local) return {rope_freq_base_swa, nullptr, 1.0};
    return {rope_freq_base, rope_factors_or_null(), rope_scaling_factor};
  }
  // Whether layer l attends through the sliding window (llama.cpp's
  // set_swa_pattern: all but every swa_pattern-th layer).
  bool is_local_layer(int64_t l) const {
    return sliding_window > 0 && (swa_pattern == 0 || l % swa_pattern < swa_pattern - 1);
  }
  // Whether layer l rotates its queries and keys (Architecture::no_rope_layer_step).
  bool uses_rope(int64_t l) const;
  // Whether layer l runs the family's recurrent mixer rather than attention
  // (attention_layers); and whether any layer does.
  bool is_recurrent_layer(int64_t l) const;
  bool has_recurrent_layers() const;
  // The mixer of layer l: what its block computes between the first norm and
  // the first residual add. block_recipe (model/block_recipe.h) makes it the
  // sublayer of the layer's first half, which training and the decoder walk;
  // the parameter layout lists each kind's tensors.
  using Mixer = model::Mixer;
  Mixer mixer(int64_t l) const { return is_recurrent_layer(l) ? architecture().recurrent_mixer : Mixer::kAttention; }
  // <arch>.attention.head_count_kv per layer: n_kv_heads, 0 on recurrent layers.
  std::vector<int64_t> kv_heads_per_layer() const;
  // The first position a local layer's query at position t sees.
  int64_t window_first_key(int64_t t) const { return t - sliding_window + 1 > 0 ? t - sliding_window + 1 : 0; }
  // Throws Error (prefixed by `where`) naming the first inconsistent field.
  void validate(const std::string& where) const;
  void validate_gated_deltanet(const std::string& where) const;
  void validate_experts(const std::string& where) const;
  // Matmul weights incl. the head (counted again when tied: it is a GEMM).
  int64_t matmul_params() const;
  // 6*N + 12*n_layers*d_model*T: forward+backward FLOPs per trained token.
  double flops_per_token(int64_t seq_len) const;
};

// What backward recomputes instead of keeping from forward (train.recompute):
// kAttn the attention block's activations (norm, q, k, v, attention output),
// kAll every activation of a block: only the residual stream is kept per
// block. Recomputed buffers are planned once and shared by all blocks.
enum class Recompute { kNone, kAttn, kAll };
Recompute recompute_from_name(const std::string& name);  // "none", "attn", "all"

// train.precision: kBf16 runs every GEMM of the blocks and the head on bf16
// inputs (weights rounded from the float master copy at each forward,
// activations stored in bf16 where they only feed GEMMs) with float
// accumulation; norms, softmax, loss, gradients and the optimizer stay float.
enum class Precision { kFp32, kBf16 };
Precision precision_from_name(const std::string& name);  // "fp32", "bf16"

// The fields a user chooses (config keys model.<name>), one row each: the
// config keys, the resume check and init.from's adoption all go through
// this list. vocab comes from the tokenizer; donor_dim and lora are set by
// the run (init.donor, train.lora).
struct ConfigField {
  const char* name;  // "d_model": config key model.d_model
  std::variant<int64_t Config::*, bool Config::*, double Config::*, std::string Config::*> member;
  const char* doc;  // one line for `ggtrain config show`
};
const std::vector<ConfigField>& config_fields();
// f's value in c, as text for messages.
std::string field_text(const Config& c, const ConfigField& f);
// Copies every field of config_fields(), the RoPE factors and the
// multi-token-prediction blocks from `from` into `to` (vocab, donor_dim and lora stay as `to` has them).
void copy_fields(Config& to, const Config& from);
// The parts of a model that come with its file, not its config keys: the
// RoPE factors and the multi-token-prediction blocks.
void copy_file_parts(Config& to, const Config& from);
// Whether a and b agree on f; `as_f32` compares doubles at the f32
// precision GGUF metadata stores them in.
bool same_field(const Config& a, const Config& b, const ConfigField& f, bool as_f32 = false);

// From the <arch>.* metadata of a GGUF of one of architectures(); `tied` is
// inferred from the absence of output.weight.
// embedding_is_d_model = false: token_embd may have another width (a donor
// table that import folds through a lens); only its row count (vocab) is used.
Config config_from_gguf(const gguf::GgufFile& f, bool embedding_is_d_model = true);

// The tensor of Config::rope_freq_factors: part of the model, not a
// parameter (nothing trains it).
inline constexpr const char* kRopeFreqsTensor = "rope_freqs.weight";

}  // namespace ggtrain::model
