#pragma once
// Inference over a model GGUF with a KV cache: tokens are fed in order (a
// prompt as one batch, then one token at a time), each layer's keys and
// values are kept, so the prefix is never recomputed.
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gguf/reader.h"
#include "infer/kv_cache.h"
#include "kernels/attention.h"
#include "kernels/gated_deltanet.h"
#include "model/block_recipe.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/params.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/packed_matrix.h"

namespace ggtrain::model {
class QuantizedBase;
}

namespace ggtrain::infer {

class Decoder {
 public:
  // `f` must outlive the decoder (weights are views into its map).
  // n_ctx: cache length, 0 for the model's context length. cache: fp32
  // keeps the training forward's numbers exactly; fp16 is llama.cpp's
  // default (the commands' too).
  explicit Decoder(const gguf::GgufFile& f, int64_t n_ctx = 0, kernels::CacheType cache = kernels::CacheType::kF32);
  // A model in memory: `params` laid out as model::ParamLayout(cfg) without
  // the matrices `quantized` holds (a LoRA run on a quantized base), LoRA tensors
  // included (applied unmerged). Views, not copies: params and quantized
  // must outlive the decoder and not change while it is used.
  Decoder(const model::Config& cfg, const float* params, const model::QuantizedBase* quantized = nullptr,
          int64_t n_ctx = 0, kernels::CacheType cache = kernels::CacheType::kF32);

  const model::Config& config() const { return cfg_; }
  int64_t n_ctx() const { return n_ctx_; }
  // How many tokens sequence 0's cache holds, and which (KvCache::tokens).
  // eval(), truncate() and reset() work on sequence 0.
  int64_t position() const { return position(0); }
  int64_t position(int64_t seq) const { return sequence(seq).cache.size(); }
  const std::vector<int32_t>& cached_tokens() const { return seqs_[0].cache.tokens(); }
  void reset() { truncate(0); }
  // One throwaway batch of 16 tokens, then an empty cache: the weights are
  // paged in from the memory map and the GEMM kernels generated, so the
  // first real prompt is timed warm (llama.cpp's tools warm up the same way
  // at load, with a batch of two).
  void warmup();
  // Forgets every cached token from position `pos` on (a chat keeps the
  // prefix its next prompt shares with the last one). A Gated DeltaNet
  // layer's state cannot be cut back: the next eval() restarts it from the
  // last state saved at or before `pos` (after each prompt, below) and
  // recomputes the kept tokens after that (attention and convolution layers
  // keep theirs).
  void truncate(int64_t pos);
  // Applies a LoRA adapter (read against this model's config) at
  // `user_scale` (llama.cpp's --lora-scale), unmerged, as llama.cpp does.
  void add_lora(const model::LoraAdapter& adapter, double user_scale);

  // Runs tokens at positions position()..+n and appends them to the cache.
  // Logits of every token (all_logits) or of the last one: logits(), valid
  // until the next eval().
  void eval(const int32_t* tokens, int64_t n, bool all_logits);
  const float* logits() const { return logits_.data(); }

  // Sequences decoded together (llama.cpp's seq_id): each keeps its own
  // cache and recurrent state, and a batch of one new token per sequence
  // multiplies every weight matrix once for all of them (a GEMM where one
  // sequence at a time is a GEMV that reads every weight per token).
  // Grows (or shrinks) to n sequences; new ones are empty.
  void set_sequences(int64_t n);
  int64_t sequences() const { return int64_t(seqs_.size()); }
  // Sequence `to` holds what `from` holds (a group of replies to one
  // prompt starts from the prompt's cache, computed once).
  void copy_sequence(int64_t from, int64_t to);
  // tokens[i] at the next position of sequence seq[i] (distinct), for i < n:
  // logits() then holds n rows, row i sequence seq[i]'s next-token logits.
  void eval_batch(const int32_t* tokens, const int64_t* seq, int64_t n);

  // The input rows of every weight-matrix product as eval() runs them
  // (llama-imatrix's collection point): the matrix's GGUF name, the expert
  // (-1: the whole tensor), and rows x cols activations. Empty: none.
  struct MatrixInput {
    const std::string& name;
    int64_t expert;
    const float* x;
    int64_t rows, cols;
  };
  void observe_matrix_inputs(std::function<void(const MatrixInput&)> observer);

 private:
  struct Layer {
    model::BlockRecipe recipe;  // what run() computes, half by half
    // per half (model::BlockHalf): the input norm, and the post norm where
    // the recipe has one (else empty)
    std::array<std::vector<float>, 2> norm = {}, post_norm = {};
    nn::Linear<float> wq, wk, wv, wo, w_gate, w_up, w_down;  // wq..wo: attention layers
    nn::Linear<float> conv_in = {}, conv_out = {};  // short-convolution layers
    std::vector<float> conv_kernel = {};  // [C, taps]
    // Gated DeltaNet layers: attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out
    nn::Linear<float> gdn_qkv = {}, gdn_gate = {}, ssm_beta = {}, ssm_alpha = {}, ssm_out = {};
    std::vector<float> ssm_conv = {}, ssm_dt = {}, ssm_a = {}, ssm_norm = {};
    std::vector<float> attn_q_norm = {}, attn_k_norm = {};  // Architecture::qk_norm, else empty
    std::vector<float> bq = {}, bk = {}, bv = {};  // Architecture::qkv_bias, else empty
    // Mixture-of-experts layers: the router, and per ExpertMatrix each
    // expert's slice of the stacked tensor.
    nn::Linear<float> router = {};
    std::array<std::vector<nn::Linear<float>>, model::kNumExpertMatrices> experts = {};
    // the shared expert (Architecture::shared_expert) and its gate [C]
    nn::Linear<float> shared_gate = {}, shared_up = {}, shared_down = {};
    std::vector<float> shared_expert_gate = {};
    nn::Linear<float>& matrix(model::BlockMatrix m) {
      nn::Linear<float>* all[model::kNumBlockMatrices] = {
          &wq,      &wk,       &wv,       &wo,        &w_gate,  &w_up,   &w_down,      &conv_in,   &conv_out,
          &gdn_qkv, &gdn_gate, &ssm_beta, &ssm_alpha, &ssm_out, &router, &shared_gate, &shared_up, &shared_down};
      return *all[m];
    }
  };
  // The weights, by llama.cpp name (`matrix` gives a shared PackedMatrix),
  // and the buffers for n_ctx_ tokens.
  // `expert(name, e, rows, cols)` gives expert e's [rows, cols] slice of a
  // stacked expert tensor.
  template <typename Matrix, typename Vector, typename Expert>
  void build(Matrix matrix, Vector vec, Expert expert);
  // Layer l's sublayer `s` (its recipe's mixer or feed-forward) on the n
  // normed rows in h_, its output in tmp_. Each kind's step is in
  // decoder_<kind>.cpp (attention, short_conv, gated_deltanet, dense_ffn,
  // experts), as the training passes' are in model/transformer_<kind>.cpp.
  void sublayer(int64_t l, model::Sublayer s, int64_t n);
  // The feed-forwards: the dense one, or the router's experts (chunks of
  // kExpertChunk tokens grouped by expert, so each expert multiplies its
  // tokens at once and a decoded token reads only its k experts' weights).
  void dense_ffn(int64_t l, int64_t n);
  void experts(int64_t l, int64_t n);
  void experts_chunk(int64_t l, const float* h, float* out, int64_t n);
  static constexpr int64_t kExpertChunk = 256;
  // y[n, p.n_out()] = x p^T (+ its adapters), x shown to the observer first.
  void project(const nn::Linear<float>& p, float* x, float* y, int64_t n) {
    if (observer_) observe(&p, x, n, p.n_in());
    p.forward(y, {x, nullptr}, n);
  }
  void observe(const void* weight, const float* x, int64_t rows, int64_t cols) const;
  // What one eval() runs: rows [row, row + n) of the activations are
  // sequence seq's positions pos.. (eval(): one segment; eval_batch(): one
  // per sequence). Matrix products take every row at once; what reads a
  // sequence's history (attention, convolutions, recurrent state) runs per
  // segment.
  struct Segment {
    int64_t seq, row, n, pos;
  };
  // What a sequence keeps between evals.
  struct Sequence {
    KvCache cache;
    // Short-convolution layers: each one's convolution input u for every
    // cached position [n_ctx, C] (the state a position reads is the taps - 1
    // rows before it, so a truncated cache needs nothing recomputed).
    std::vector<std::vector<float>> conv_history = {};
    // Gated DeltaNet layers: each one's rule state [value heads, d, d] and the
    // convolution inputs of its last taps - 1 positions [taps - 1, conv_dim]
    // (zeros before position 0), valid for gdn_position tokens.
    std::vector<std::vector<float>> gdn_state = {}, gdn_conv_state = {};
    int64_t gdn_position = 0;
  };
  Sequence make_sequence() const;
  const Sequence& sequence(int64_t seq) const;
  // The layers and the head's logits of the n rows in x_ as segments_ says
  // (rows from `first_logit` on get logits), then each segment's tokens
  // appended to its sequence.
  void run(const int32_t* tokens, int64_t n, int64_t first_logit);
  // Attention on `threads` threads with their scratch.
  void attention(int64_t l, const Segment& s, float* scratch, int64_t threads);
  // The mixers.
  void attention_mixer(int64_t l, int64_t n);
  void conv_mixer(int64_t l, int64_t n);
  void gdn_mixer(int64_t l, int64_t n);
  kernels::GdnShape gdn_shape() const {
    return {1,           0, cfg_.ssm_time_step_rank, cfg_.ssm_group_count, cfg_.ssm_state_size, cfg_.ssm_conv_kernel,
            cfg_.rms_eps};
  }
  // Before an eval() after truncate() cut into the Gated DeltaNet states:
  // take the latest snapshot (or zeros) and run the kept tokens after it.
  void restore_recurrent_state();
  // Sequence 0's Gated DeltaNet states as they were after each of its last
  // kSnapshots prompts (evals of more than one token), oldest first: a chat
  // whose template re-renders the last reply cuts the cache back to where
  // that reply began, which is where its prompt ended, so the next turn
  // recomputes none of the conversation before it. llama.cpp's server keeps
  // such checkpoints of recurrent states for the same reason.
  struct Snapshot {
    int64_t position;
    std::vector<std::vector<float>> state, conv_state;
  };
  static constexpr size_t kSnapshots = 4;
  std::vector<Snapshot> snapshots_;
  void save_snapshot();
  kernels::AttnShape flash_shape(int64_t n) const;
  kernels::DecodeAttnShape decode_shape(int64_t window = 0) const {
    return {cfg_.n_heads, cfg_.n_kv_heads, cfg_.d_head(), window};
  }
  // out = rmsnorm(tmp_) of n rows (a post-norm), added to the residual stream x_.
  void add_post_normed(const std::vector<float>& norm, int64_t n);
  // Prompts of at least this many tokens into an empty cache use the flash
  // kernel (its 64-query tiles gain nothing on a handful of queries).
  static constexpr int64_t kFlashPrompt = 16;

  model::Config cfg_;
  int64_t n_ctx_;
  int64_t threads_;  // the attention scratch is planned for this many
  kernels::CacheType cache_type_;
  std::vector<Sequence> seqs_;
  std::vector<Segment> segments_;
  nn::Embedding<float> token_embd_;
  nn::Linear<float> output_;  // the head (the embedding's matrix when tied)
  // Adapters added with add_lora, and each one's [n_ctx, rank] buffer of x A^T
  // (their branches point into both; a deque keeps them where they are).
  std::deque<model::LoraAdapter> adapters_;
  std::deque<std::vector<float>> lora_u_;
  std::vector<float> output_norm_;
  std::vector<Layer> layers_;
  std::vector<float> rope_cos_, rope_sin_;
  std::vector<float> rope_cos_local_, rope_sin_local_;  // the local layers' (Config::sliding_window)
  std::vector<int32_t> window_start_;  // [n_ctx] a prompt's first visible key per position (local layers)
  // activations for up to n_ctx tokens
  std::vector<float> x_, h_, q_, k_, v_, att_out_, tmp_, gate_, up_, rstd_, logits_;
  std::vector<float> head_rstd_;  // [n_ctx * n_heads] the head norms' (qk_norm)
  std::vector<float> lse_, flash_scratch_;  // the flash kernel's, for prompts into an empty cache
  std::vector<float> decode_scratch_;  // attention_decode's, for the others
  std::vector<float> batch_scratch_;  // attention_decode's on one thread, per thread (set_sequences > 1)
  // Short-convolution layers: in_proj's output for a batch [n_ctx, 3C].
  std::vector<float> bcx_;
  // Gated DeltaNet layers: a batch's convolution window [taps - 1 + n_ctx,
  // conv_dim] (a segment's rows preceded by its sequence's conv state), and
  // its z [n_ctx, value_dim], b and alpha [n_ctx, value heads], output y
  // [n_ctx, value_dim].
  std::vector<float> gdn_window_, gdn_z_, gdn_b_, gdn_alpha_, gdn_y_;
  // Gated attention (Architecture::attn_output_gate): attn_q's output
  // [n_ctx, 2 q_dim] and the gate [n_ctx, q_dim].
  std::vector<float> q_full_, attn_gate_;
  // Mixture-of-experts layers, for a chunk of tokens: router probabilities
  // [chunk, E], choices and weights [chunk, k], the grouping, gathered
  // inputs and outputs [chunk k, C], gate and up [chunk k, F_exp].
  std::vector<float> moe_probs_, moe_weights_, moe_x_, moe_y_, moe_gate_, moe_up_;
  // the shared expert's gate and up [chunk, F_sh], output [chunk, C]
  std::vector<float> shared_gate_, shared_up_, shared_y_;
  std::vector<int32_t> moe_chosen_, moe_offsets_, moe_row_of_;
  // observe_matrix_inputs': the observer, and each weight's name and expert
  std::function<void(const MatrixInput&)> observer_;
  std::unordered_map<const void*, std::pair<std::string, int64_t>> weight_names_;
};

}  // namespace ggtrain::infer
