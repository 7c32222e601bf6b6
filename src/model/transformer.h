#pragma once
// The decoder-only transformer of every architecture in model/architecture
// (llama, qwen2, qwen3, gemma3, smollm3, lfm2, qwen35), written the way llm.c writes GPT-2: explicit
// forward and backward passes over buffers that are planned once, at
// construction, from (config, batch, seq_len). Nothing is allocated per step.
//
// T is float for training; double exists for finite-difference checks.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/expert_routing.h"
#include "kernels/gated_deltanet.h"
#include "kernels/quant_linear.h"
#include "kernels/short_conv.h"
#include "kernels/tile_gemm_bf16.h"
#include "model/block_recipe.h"
#include "model/config.h"
#include "model/params.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "util/aligned_buffer.h"

namespace ggtrain::model {

// model/quantized_base.h: users of the model that hold no quantized base
// need not see the GGUF reader.
class QuantizedBase;

// Rows of logits the loss computes at once by default: about 1 Mi floats per
// thread, at least 256 rows (the head's GEMMs lose speed on fewer rows:
// bench/results.md, "Memory"), at most all BT rows.
int64_t default_logit_chunk_rows(int64_t vocab, int n_threads, int64_t bt);

struct ModelOptions {
  Recompute recompute = Recompute::kNone;
  Precision precision = Precision::kFp32;
  // Rows of logits the loss computes at once (0: default_logit_chunk_rows).
  // Training never holds more logits than that.
  int64_t logit_chunk_rows = 0;
  // Attention tile sizes (0: the kernel's defaults); tests shrink them.
  int64_t attn_tile_rows = 0, attn_tile_cols = 0;
  // Frozen matrices kept in their blocks (a LoRA run on a quantized base):
  // absent from params() and layout(); every GEMM dequantizes a band of
  // rows into a scratch buffer. Float models only; must outlive the model.
  const QuantizedBase* quantized = nullptr;
  // Mixture-of-experts families: the weight of the load-balancing loss that
  // backward() adds to the objective (Transformer::aux_loss); 0: none.
  double router_aux_loss_coef = 0;
};

// Wall time per operation, summed over layers and steps, when attached with
// set_profile() (bench/train_bench prints it); off otherwise.
struct OpProfile {
  enum Op {
    kEmbedding,
    kNorm,
    kQkv,
    kRope,
    kAttention,
    kShortConv,  // the convolution of a short-convolution layer (its projections count as kQkv, kAttnOutput)
    kGatedDeltaNet,  // a Gated DeltaNet layer between its projections (likewise)
    kAttnOutput,
    kGateUp,
    kSwiglu,
    kDown,
    kResidual,
    kLora,
    kHead,
    kLoss,
    kOps
  };
  enum Phase { kForward, kBackward, kRecompute, kPhases };
  double seconds[kPhases][kOps] = {};
  // The same time by block and half, all phases together; set_profile
  // sizes it. The mixer half is the input norm, the mixer and, in the
  // forward, the residual add fused with the feed-forward's norm; the
  // feed-forward half is the rest, that norm's backward included. The split
  // is the same for every kind, so blocks of different kinds (attention,
  // Gated DeltaNet, ...) compare inside one run by their mixer halves.
  // Indexed by BlockHalf.
  std::vector<std::array<double, 2>> layer_seconds;
  static const char* name(int op);
};

using nn::GemmIn;
using nn::with_pointer;

template <typename T>
struct LayerActs {
  T* rstd_attn;  // [BT]
  GemmIn<T> h_attn;  // [BT, C]   normed input of attention
  T* q;  // [BT, q_dim]  after RoPE
  T* k;  // [BT, kv_dim] after RoPE
  // Architecture::qk_norm: the projections before their head norms, and the
  // norms' 1/rms per row of d_head; null otherwise.
  T *q_raw = nullptr, *k_raw = nullptr, *rstd_q = nullptr, *rstd_k = nullptr;
  T* v;  // [BT, kv_dim]
  T* lse;  // [B, H, T] log-sum-exp of each attention row (flash attention)
  GemmIn<T> attn_out;  // [BT, q_dim] heads concatenated, before attn_output
  T* x_mid;  // [BT, C]   residual stream after attention
  T* rstd_ffn;  // [BT]
  GemmIn<T> h_ffn;  // [BT, C]
  T* gate;  // [BT, F]
  T* up;  // [BT, F]
  GemmIn<T> act;  // [BT, F]   silu(gate) * up (gelu_tanh(gate) * up: FfnActivation::kGeluTanh)
  // Mixture-of-experts layers (kernels/expert_routing.h): the router's
  // probabilities [BT, E], each token's k experts and their weights
  // [BT, k], the (token, slot) pairs grouped by expert; then per pair, in
  // grouped order, the expert's gate, up, act [BT k, F_exp] and output
  // [BT k, C] before its weight.
  T *moe_probs = nullptr, *moe_weights = nullptr;
  int32_t* moe_chosen = nullptr;
  kernels::ExpertGroups moe_groups{};
  T *moe_gate = nullptr, *moe_up = nullptr, *moe_y = nullptr;
  GemmIn<T> moe_act;
  // Architecture::shared_expert: its gate and up [BT, F_sh], act, output
  // before its sigmoid gate [BT, C], and the gate's logit [BT].
  T *shared_gate = nullptr, *shared_up = nullptr, *shared_y = nullptr, *shared_logit = nullptr;
  GemmIn<T> shared_act;
  // Architecture::post_norms: the attention and feed-forward projections'
  // outputs [BT, C] before their norms, and the norms' 1/rms; else null.
  T *attn_proj = nullptr, *rstd_attn_post = nullptr, *ffn_proj = nullptr, *rstd_ffn_post = nullptr;
  std::array<T*, kNumBlockMatrices> lora_u{};  // [BT, rank] x A^T per LoRA target, or null
  std::array<T*, kNumExpertMatrices> expert_lora_u{};  // [BT k, rank] in grouped rows, per expert target
  // Short-convolution layers (kernels/short_conv.h; h_attn is their normed
  // input): in_proj's output (b | c | x) [BT, 3C], the convolution's input
  // u = b x and output v [BT, C], and y = c v [BT, C], out_proj's input.
  T *bcx = nullptr, *conv_u = nullptr, *conv_v = nullptr;
  GemmIn<T> conv_y;
  // Architecture::attn_output_gate: attn_q's output [BT, 2 q_dim] (per head
  // query | gate), the gate [BT, q_dim] and attention's output before it
  // [BT, q_dim]; attn_out is then o * sigmoid(gate).
  T *q_full = nullptr, *attn_gate = nullptr, *attn_o = nullptr;
  // Gated DeltaNet layers (kernels/gated_deltanet.h; h_attn is their normed
  // input): the projections u (attn_qkv) [BT, conv_dim], z (attn_gate)
  // [BT, value_dim], b (ssm_beta) and alpha (ssm_alpha) [BT, value heads],
  // what the kernel keeps, and its output y, ssm_out's input [BT, value_dim].
  T *gdn_u = nullptr, *gdn_z = nullptr, *gdn_b = nullptr, *gdn_alpha = nullptr;
  kernels::GdnActs<T> gdn{};
  GemmIn<T> gdn_y;
};

template <typename T>
class Transformer {
 public:
  // `frozen`: parameter names that keep their values; they get no gradient
  // buffer (grad_layout() lacks them) and backward() skips their gradients.
  Transformer(const Config& cfg, int64_t batch, int64_t seq_len, const std::set<std::string>& frozen = {},
              const ModelOptions& opts = {});

  const Config& config() const { return cfg_; }
  const ModelOptions& options() const { return opts_; }
  const ParamLayout& layout() const { return layout_; }
  // Layout of grads() (and of the optimizer moments): the trainable tensors.
  const ParamLayout& grad_layout() const { return grad_layout_; }
  int64_t n_trainable() const { return grad_layout_.total(); }
  int64_t batch() const { return batch_; }
  int64_t seq_len() const { return seq_len_; }
  T* params() { return params_.data(); }
  const T* params() const { return params_.data(); }
  T* grads() { return grads_.data(); }
  const T* grads() const { return grads_.data(); }
  int64_t n_params() const { return layout_.total(); }
  // The frozen donor table E [vocab, donor_dim] of a warm start (fill it
  // before forward); null when config().donor_dim == 0.
  T* donor_table() { return donor_.size() ? donor_.data() : nullptr; }
  // Activations and scratch planned at construction (the full logits of
  // forward(inputs, nullptr) come on top, allocated on first use).
  size_t activation_bytes() const { return size_t(planned_act_floats_) * sizeof(T); }
  // What activation_bytes() would be for a model of these arguments,
  // planned without allocating anything (a run's memory plan).
  static size_t planned_activation_bytes(const Config& cfg, int64_t batch, int64_t seq_len,
                                         const std::set<std::string>& frozen = {}, const ModelOptions& opts = {});

  // inputs, targets: [B, T] token ids; a target may be kernels::kNoTarget
  // (no loss there). With targets: returns the mean cross-entropy over the
  // positions whose target counts (0 when none does) and prepares
  // backward() (the loss runs over chunks of rows and keeps no logits).
  // Without: computes all logits, for logits(), and returns 0.
  // doc_start: [B, T] the first position of each position's document
  // (non-decreasing, at most the position), so that attention stays within
  // packed documents; null: each row is one sequence.
  T forward(const int32_t* inputs, const int32_t* targets, const int32_t* doc_start = nullptr);
  // The mean loss only, for evaluation: no preparation for backward().
  T evaluate(const int32_t* inputs, const int32_t* targets, const int32_t* doc_start = nullptr);
  // The load-balancing loss of the last forward pass (mixture-of-experts
  // families; 0 otherwise), unweighted: E sum_e f_e P_e over every layer's
  // tokens together, f_e the share of (token, slot) picks of expert e and
  // P_e its mean router probability, as Hugging Face's
  // load_balancing_loss_func defines it. backward() adds
  // options().router_aux_loss_coef times its gradient.
  T aux_loss() const { return aux_loss_; }
  // Targets of the last forward()/evaluate() that carried loss: what the
  // mean divided by (callers weight micro-batches by it).
  int64_t counted_targets() const { return counted_targets_; }
  // Objectives over whole sequences (preference tuning) pass over the head
  // twice: forward_scores() runs the model and leaves each position's
  // -log p(target) in token_losses() (0 where no target counts), preparing
  // no gradient; backward_weighted(d), with d[i] = d(objective) /
  // d(token_losses()[i]) for each of the B*T positions, computes the head's
  // gradients from those weights and runs backward(). The blocks run once.
  void forward_scores(const int32_t* inputs, const int32_t* targets, const int32_t* doc_start = nullptr);
  const T* token_losses() const { return losses_; }
  void backward_weighted(const T* d_token_loss);
  // Objectives over the whole next-token distribution (distillation), after
  // forward_scores(): the head's logits again, chunk by chunk, f(first row,
  // rows, logits [rows, vocab]). visit_logits lets f read them;
  // backward_logits has f turn them in place into d(objective)/d(logits),
  // which flow through the head, then backward() runs the blocks.
  using LogitChunkFn = std::function<void(int64_t first_row, int64_t rows, T* logits)>;
  void visit_logits(const LogitChunkFn& f);
  void backward_logits(const LogitChunkFn& to_d_logits);
  // [B, T, vocab], valid after forward(inputs, nullptr).
  const T* logits() const { return logits_.data(); }
  void zero_grad();
  // Adds d(loss_scale * mean loss)/d(params) to grads(). Needs a forward()
  // with targets; once per forward.
  void backward(T loss_scale = T(1));
  // Called by backward() as soon as block l's gradients are final (blocks
  // finish from the last to the first), so that data-parallel training can
  // start reducing them while the blocks below still compute.
  std::function<void(int64_t l)> on_layer_grads;
  // Attaches (or, with null, detaches) a per-operation timer.
  void set_profile(OpProfile* p) {
    profile_ = p;
    if (p) p->layer_seconds.resize(size_t(cfg_.n_layers), {0.0, 0.0});
  }

 private:
  Transformer(const Config& cfg, int64_t batch, int64_t seq_len, const std::set<std::string>& frozen,
              const ModelOptions& opts, bool allocate);
  int64_t planned_act_floats_ = 0;
  void plan(BumpPlan<T>& p);
  GemmIn<T> take_gemm_in(BumpPlan<T>& p, int64_t n) const;
  // The layers' weights in their forms (float, bf16 shadow, held quantized)
  // with their gradients and LoRA branches, bound once the buffers are planned.
  void bind_layers();
  // The scratch a held quantized base dequantizes bands into: the largest
  // held block matrix, bands of at least 1024 rows of a held vocabulary matrix.
  void size_band_scratch();
  // dy as a GEMM input: itself in fp32, rounded into `scratch` in bf16.
  GemmIn<T> gemm_in(T* dy, kernels::bf16* scratch, int64_t n);
  const kernels::bf16* bf16_shadow(const T* w) const { return bf16_ ? wbf16_.data() + (w - params_.data()) : nullptr; }
  // bf16 training runs attention's tiles on bf16 too, where the CPU has
  // AVX512_BF16 (kernels/attention_bf16.h); elsewhere attention stays float.
  bool bf16_attention() const { return bf16_ && kernels::kNativeTileBf16 && cfg_.d_head() % 2 == 0; }
  bool rope_halves() const { return cfg_.architecture().rope == RopeLayout::kHalves; }
  bool qk_norm() const { return cfg_.architecture().qk_norm; }
  // Architecture::embedding_scale's factor: sqrt(d_model), rounded to T as llama.cpp's sqrtf.
  T embedding_scale() const { return T(std::sqrt(double(cfg_.d_model))); }
  // Layer l's attention: the global one, or the sliding window's.
  const kernels::AttnShape& attn_shape(int64_t l) const {
    return cfg_.is_local_layer(l) ? local_attn_shape_ : attn_shape_;
  }
  const T* rope_cos(int64_t l) const { return cfg_.is_local_layer(l) ? rope_cos_local_ : rope_cos_; }
  const T* rope_sin(int64_t l) const { return cfg_.is_local_layer(l) ? rope_sin_local_ : rope_sin_; }
  // out = rmsnorm(proj) (the post-norm of an output) and its backward, which
  // turns d_out into d_proj (written).
  void post_norm_forward(T* out, T* rstd, const T* proj, const T* w);
  void post_norm_backward(T* d_proj, T* dw, const T* d_out, const T* proj, const T* w, const T* rstd);
  FfnActivation ffn_activation() const { return cfg_.architecture().ffn_activation; }
  // The mixers whose activations a plan_layer_acts() call lays out.
  struct Mixers {
    bool attention, short_conv, gated_deltanet;
    bool any() const { return attention || short_conv || gated_deltanet; }
  };
  void plan_layer_acts(BumpPlan<T>& p, LayerActs<T>& a, Mixers mixer_part, bool ffn_part);
  Mixers mixers_of(int64_t l) const {
    const Sublayer m = recipes_[size_t(l)].mixer().sublayer;
    return {m == Sublayer::kAttention, m == Sublayer::kShortConv, m == Sublayer::kGatedDeltaNet};
  }
  // The mixers some layer has (the shared recomputation buffers serve all).
  Mixers model_mixers() const {
    Mixers all{false, false, false};
    for (int64_t l = 0; l < cfg_.n_layers; ++l) {
      const Mixers m = mixers_of(l);
      all = {all.attention || m.attention, all.short_conv || m.short_conv, all.gated_deltanet || m.gated_deltanet};
    }
    return all;
  }
  kernels::ShortConvShape conv_shape() const {
    return {batch_, seq_len_, cfg_.d_model, cfg_.shortconv_l_cache, attn_shape_.doc_start, 0};
  }
  kernels::GdnShape gdn_shape() const {
    return {batch_,
            seq_len_,
            cfg_.ssm_time_step_rank,
            cfg_.ssm_group_count,
            cfg_.ssm_state_size,
            cfg_.ssm_conv_kernel,
            cfg_.rms_eps,
            64,
            attn_shape_.doc_start};
  }
  bool gated_attention() const { return cfg_.architecture().attn_output_gate; }
  void embed(const int32_t* inputs);
  // Embedding, every block and the final norm: h_final_ from the inputs.
  void embed_and_blocks(const int32_t* inputs, const int32_t* doc_start);
  // Validates and keeps the batch's document starts for attention (both passes).
  void set_documents(const int32_t* doc_start);
  // Half `half` of block l as its BlockRecipe says: x_out = x_in +
  // post_norm(sublayer(norm(x_in))). The mixer half ends with the
  // feed-forward half's input norm of x_out in the same pass, so the
  // feed-forward half starts at its sublayer. With x_out null
  // (recomputation for backward) the sublayer stops at what its backward
  // reads, and a post norm runs again only where its buffers are shared by
  // the blocks (Recompute::kAll).
  void half_forward(int64_t l, BlockHalf half, const T* x_in, T* x_out);
  // d_res is dL/d(x_out) of that half and becomes dL/d(x_in).
  void half_backward(int64_t l, BlockHalf half, const T* x_in, T* d_res);
  // The sublayers themselves, between a half's input norm (h_attn, h_ffn)
  // and its post norm or residual add: forward writes the sublayer's output
  // to `out` (null: stop at what backward reads); backward reads dL/d(out)
  // from d_out and leaves dL/d(the normed input) in d_normed_.
  void sublayer_forward(int64_t l, Sublayer s, T* out);
  void sublayer_backward(int64_t l, Sublayer s, T* d_out);
  // The post norm's input and its rstd for each half (Architecture::post_norms).
  T* post_norm_input(const LayerActs<T>& a, BlockHalf half) const {
    return half == kMixerHalf ? a.attn_proj : a.ffn_proj;
  }
  T* post_norm_rstd(const LayerActs<T>& a, BlockHalf half) const {
    return half == kMixerHalf ? a.rstd_attn_post : a.rstd_ffn_post;
  }
  // Each sublayer kind's activations (plan_*_acts: what a layer keeps for
  // its backward; plan_*_grads: the buffers only that kind uses, shared by
  // its layers: its gradients, and scratch both passes use), forward and
  // backward, in transformer_<kind>.cpp. The
  // backward buffers of attention and of both feed-forwards are planned in
  // plan() itself (the experts reuse the dense feed-forward's).
  // Attention (transformer_attention.cpp):
  void plan_attention_acts(BumpPlan<T>& p, LayerActs<T>& a);
  void attn_block_forward(int64_t l, T* out);
  void attn_block_backward(int64_t l, T* d_out);
  // The backward of gated attention's two steps (model/family_ops.h's
  // split_query_gate and apply_output_gate): d(attn_out) becomes d(o) (in
  // place) and d(gate); d(q_raw) and d(gate) join into d_q_full_.
  void output_gate_backward(const LayerActs<T>& a);
  void join_query_gate_grad(const T* d_q);
  // LFM2's short convolution (transformer_short_conv.cpp):
  void plan_conv_acts(BumpPlan<T>& p, LayerActs<T>& a);
  void plan_conv_grads(BumpPlan<T>& p);
  void conv_block_forward(int64_t l, T* out);
  void conv_block_backward(int64_t l, T* d_out);
  // Qwen3.5's Gated DeltaNet (transformer_gated_deltanet.cpp):
  void plan_gdn_acts(BumpPlan<T>& p, LayerActs<T>& a);
  void plan_gdn_grads(BumpPlan<T>& p);
  void gdn_block_forward(int64_t l, T* out);
  void gdn_block_backward(int64_t l, T* d_out);
  // The dense feed-forward (transformer_dense_ffn.cpp):
  void plan_dense_ffn_acts(BumpPlan<T>& p, LayerActs<T>& a);
  void dense_ffn_forward(int64_t l, T* out);
  // d_act_ (n values) through the gated activation of `gate` and `up` into
  // d_gate_ and d_up_ (their bf16 forms in bf16 training: they only feed GEMMs).
  void gate_backward(const T* gate, const T* up, int64_t n);
  void dense_ffn_backward(int64_t l, T* d_out);
  // The experts (transformer_experts.cpp):
  // A mixture-of-experts layer's feed-forward (h_ffn in, out = the
  // experts' weighted sum; out null: stop before the sum) and its backward
  // (d_out: dL/d(out); leaves dL/d(h_ffn) in d_normed_).
  kernels::RoutingShape routing_shape() const {
    return {batch_ * seq_len_, cfg_.n_experts, cfg_.n_experts_used, cfg_.architecture().renormalize_expert_weights};
  }
  void experts_forward(int64_t l, T* out);
  // The shared expert of layer l: forward up to its gated output's parts
  // (shared_y, shared_logit); backward adds its share to d_normed_.
  void shared_expert_forward(int64_t l);
  void shared_expert_backward(int64_t l, const T* d_res);
  void refresh_bf16_shadow();  // wbf16_ from params_, before a forward
  T load_balancing_loss() const;  // aux_loss() from the picks and probabilities forward counted
  void experts_backward(int64_t l, const T* d_out);
  // Copies each pair's token row of h_ffn into moe_x_ in grouped order.
  void gather_expert_inputs(const LayerActs<T>& a);
  // Expert e's matrix m of layer l: a view of its slice of the stacked tensor.
  nn::Linear<T>& expert(int64_t l, int64_t e, ExpertMatrix m) { return experts_[size_t(l)][size_t(m)][size_t(e)]; }
  // Expert e's matrix m on its n grouped rows from `first` on (and its
  // adapter, where the experts are a LoRA target), and the backward.
  void expert_project(int64_t l, int64_t e, ExpertMatrix m, int64_t first, int64_t n, T* out, const GemmIn<T>& in);
  void expert_project_bwd(int64_t l, int64_t e, ExpertMatrix m, int64_t n, T* din, const GemmIn<T>& dout,
                          const GemmIn<T>& in, bool accumulate);
  void plan_expert_acts(BumpPlan<T>& p, LayerActs<T>& a);
  void plan_expert_grads(BumpPlan<T>& p);
  int32_t* take_ints(BumpPlan<T>& p, int64_t n) const {
    return reinterpret_cast<int32_t*>(p.take((n * 4 + int64_t(sizeof(T)) - 1) / int64_t(sizeof(T))));
  }
  void layer_backward(int64_t l, const T* x_in, T* d_res);
  // Loss over chunks of rows of h_final_ (with `targeted_only`, only rows
  // that have a target); with `prepare_backward`, also the gradients of the
  // head at unit loss scale (d_h_final_, d_head_).
  T head_loss(bool prepare_backward, bool targeted_only);
  // A chunk of the head's rows as the GEMMs and the loss read it.
  struct HeadChunk {
    GemmIn<T> h;
    const int32_t* targets;
    T *losses, *lse, *d_h;
    bool gathered;  // in the head_* buffers, to scatter back
  };
  void select_head_rows(bool targeted_only);
  HeadChunk head_chunk(int64_t first, int64_t rows);
  void scatter_head_chunk(const HeadChunk& c, int64_t first, int64_t rows, bool with_gradient);
  void check_tokens(const int32_t* tokens, const char* what, bool allow_no_target) const;
  void check_threads() const;
  // Projection t of block l (its linear op, then its LoRA branch) and its
  // backward: din (= or +=, per accumulate) from dout.
  void project(int64_t l, BlockMatrix t, T* out, const GemmIn<T>& in, OpProfile::Op op);
  void project_bwd(int64_t l, BlockMatrix t, T* din, const GemmIn<T>& dout, const GemmIn<T>& in, bool accumulate,
                   OpProfile::Op op);
  // Profiling: the time since the previous call goes to `op` in phase_.
  void charge_time_to(OpProfile::Op op);

  Config cfg_;
  ModelOptions opts_;
  ParamLayout layout_, grad_layout_;
  int64_t batch_, seq_len_;
  int n_threads_;
  int64_t chunk_rows_;  // rows of logits per loss chunk
  AlignedBuffer<T> params_, grads_, acts_, donor_, logits_;
  bool bf16_ = false;
  bool frozen_bf16_ready_ = false;  // a LoRA run's frozen base is in wbf16_
  AlignedBuffer<kernels::bf16> wbf16_;  // bf16 copy of params_ (bf16 training)
  ModelWeights<T> w_, g_;
  std::vector<std::array<nn::Linear<T>, kNumBlockMatrices>> proj_;  // per block, per BlockMatrix
  // per block, per ExpertMatrix, per expert: views of the stacked tensors
  std::vector<std::array<std::vector<nn::Linear<T>>, kNumExpertMatrices>> experts_;
  // the load-balancing loss: over every layer of the last forward, each
  // expert's picks and summed router probability
  std::vector<double> expert_picks_, expert_prob_sums_;
  std::vector<T> d_balance_;  // [E] the load-balancing loss's d(loss)/d(probability), each backward
  T aux_loss_ = T(0);
  T loss_scale_ = T(1);  // backward()'s
  nn::Embedding<T> token_embd_;  // unused with a donor table
  nn::Linear<T> lens_;  // the donor lens (Config::donor_dim > 0)
  nn::Linear<T> head_;  // its gradient goes to d_head_ (at unit loss scale)
  int64_t band_scratch_size_ = 0;  // floats of dequantized rows at a time
  T* band_scratch_ = nullptr;
  kernels::AttnShape attn_shape_;
  std::vector<int32_t> doc_start_;  // [BT] set_documents' copy (attn_shape_.doc_start points here)
  // The local layers' attention (Config::sliding_window): each query's
  // first key is the later of its document's start and the window's.
  kernels::AttnShape local_attn_shape_;
  std::vector<int32_t> window_start_;  // [BT] (local_attn_shape_.doc_start)
  int64_t counted_targets_ = 0;

  // activations
  std::vector<T*> residual_;  // n_layers + 1 of [BT, C]; [0] is the embedding
  T* x_donor_ = nullptr;  // [BT, donor_dim] donor rows of the inputs (warm start)
  std::vector<LayerActs<T>> layer_acts_;
  std::vector<BlockRecipe> recipes_;  // per block
  T *rstd_final_, *lse_, *losses_;
  GemmIn<T> h_final_;
  T* logit_chunk_;  // [chunk_rows_, vocab]
  kernels::bf16* logit_chunk_h_ = nullptr;  // its bf16 rounding (bf16 training)
  T* d_h_final_;  // [BT, C] d(mean loss)/d(h_final), filled by forward
  T* d_head_ = nullptr;  // [vocab, C] d(mean loss)/d(output), when output is trainable
  // The rows the head runs on this pass, and a chunk of them gathered:
  // h [chunk_rows_, C], their targets, losses, log-sum-exps and d(h).
  std::vector<int64_t> head_rows_;
  GemmIn<T> head_h_;
  std::vector<int32_t> head_targets_;
  T *head_losses_ = nullptr, *head_lse_ = nullptr, *head_dh_ = nullptr;
  T *rope_cos_, *rope_sin_;
  T *rope_cos_local_, *rope_sin_local_;  // the local layers' tables (== the global ones without a window)
  T* attn_scratch_;  // per-thread tiles of the attention kernels
  // backward scratch, shared by all layers
  // d_normed_: the gradient of a block's normed input (h_attn or h_ffn).
  T *d_res_, *d_normed_, *d_q_, *d_k_, *d_v_, *d_attn_out_, *d_act_;
  T *d_q_raw_ = nullptr, *d_k_raw_ = nullptr;  // before the head norms (qk_norm)
  GemmIn<T> d_gate_, d_up_;
  // bf16 roundings of gradients that feed GEMMs (bf16 training)
  kernels::bf16 *d_res_h_ = nullptr, *d_q_h_ = nullptr, *d_k_h_ = nullptr, *d_v_h_ = nullptr;
  T* d_lora_u_ = nullptr;  // [BT, rank]
  kernels::bf16* d_lora_u_h_ = nullptr;  // its bf16 rounding (bf16 training)
  // short-convolution layers' backward: d(in_proj output) [BT, 3C] (and its
  // bf16 rounding), d(v) and d(y) [BT, C]
  T *d_bcx_ = nullptr, *d_conv_v_ = nullptr, *d_conv_y_ = nullptr;
  kernels::bf16* d_bcx_h_ = nullptr;
  // gated attention's backward: d(attn_q's output) [BT, 2 q_dim], d(gate) [BT, q_dim]
  T *d_q_full_ = nullptr, *d_attn_gate_ = nullptr;
  // Gated DeltaNet layers' backward: d(y) and d(z) [BT, value_dim], d(u)
  // [BT, conv_dim], d(b) and d(alpha) [BT, value heads], and one bf16
  // rounding buffer that each of them passes through on its way to a GEMM.
  T *d_gdn_y_ = nullptr, *d_gdn_z_ = nullptr, *d_gdn_u_ = nullptr, *d_gdn_b_ = nullptr, *d_gdn_alpha_ = nullptr;
  kernels::bf16* d_gdn_h_ = nullptr;
  T* gdn_scratch_ = nullptr;  // kernels::gdn_scratch_floats: shared by every layer's forward and backward
  // Mixture-of-experts layers: the gathered inputs [BT k, C] (forward and
  // backward), d(expert output) then d(expert input) [BT k, C] (with a bf16
  // rounding), d(weights) [BT, k], d(router logits) [BT, E].
  GemmIn<T> moe_x_;
  T *d_moe_rows_ = nullptr, *d_moe_weights_ = nullptr, *d_moe_logits_ = nullptr;
  T *d_shared_y_ = nullptr, *d_shared_logit_ = nullptr;  // [BT, C], [BT] (shared expert)
  kernels::bf16* d_moe_rows_h_ = nullptr;
  const int32_t* inputs_ = nullptr;
  const int32_t* targets_ = nullptr;
  const int32_t* scored_targets_ = nullptr;  // forward_scores()'s, until backward_weighted()
  OpProfile* profile_ = nullptr;
  OpProfile::Phase phase_ = OpProfile::kForward;
  // The block and half the time goes to; block -1: outside the blocks.
  int64_t profile_layer_ = -1;
  BlockHalf profile_half_ = kMixerHalf;
  void charge_block(int64_t l, BlockHalf h) {
    profile_layer_ = l;
    profile_half_ = h;
  }
  double last_charge_s_ = 0;
};

extern template class Transformer<float>;
extern template class Transformer<double>;

}  // namespace ggtrain::model
