#include "model/transformer.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/attention_bf16.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "model/family_ops.h"
#include "model/quantized_base.h"
#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::model {

using namespace ggtrain::kernels;

int64_t default_logit_chunk_rows(int64_t vocab, int n_threads, int64_t bt) {
  return std::min(bt, std::max<int64_t>(256, int64_t(n_threads) * (int64_t(1) << 20) / vocab));
}

const char* OpProfile::name(int op) {
  static const char* const names[kOps] = {"embedding",  "rmsnorm",        "q/k/v",       "rope",    "attention",
                                          "short_conv", "gated_deltanet", "attn_output", "gate/up", "swiglu",
                                          "down",       "residual",       "lora",        "head",    "loss"};
  return op >= 0 && op < kOps ? names[op] : "?";
}

namespace {
std::set<std::string> held_names(const ModelOptions& o) {
  return o.quantized ? o.quantized->names() : std::set<std::string>{};
}
}  // namespace

template <typename T>
Transformer<T>::Transformer(const Config& cfg, int64_t batch, int64_t seq_len, const std::set<std::string>& frozen,
                            const ModelOptions& opts)
    : Transformer(cfg, batch, seq_len, frozen, opts, true) {}

template <typename T>
size_t Transformer<T>::planned_activation_bytes(const Config& cfg, int64_t batch, int64_t seq_len,
                                                const std::set<std::string>& frozen, const ModelOptions& opts) {
  return Transformer(cfg, batch, seq_len, frozen, opts, false).activation_bytes();
}

// allocate = false: only the checks and the activations' sizing pass
// (planned_activation_bytes), nothing allocated.
template <typename T>
Transformer<T>::Transformer(const Config& cfg, int64_t batch, int64_t seq_len, const std::set<std::string>& frozen,
                            const ModelOptions& opts, bool allocate)
    : cfg_(cfg),
      opts_(opts),
      layout_(cfg, held_names(opts)),
      grad_layout_(layout_.trainable(frozen)),
      batch_(batch),
      seq_len_(seq_len),
      n_threads_(omp_get_max_threads()) {
  cfg_.validate("model config");
  recipes_ = block_recipes(cfg_);
  bf16_ = opts_.precision == Precision::kBf16;
  if (bf16_ && !std::is_same_v<T, float>) fail("model: bf16 precision needs a float model");
  if (batch_ <= 0 || seq_len_ <= 0) fail("model: batch {} and seq_len {} must be positive", batch_, seq_len_);
  if (seq_len_ > cfg_.ctx && !cfg_.has_recurrent_layers())
    fail("model: seq_len {} exceeds the context length {}", seq_len_, cfg_.ctx);
  attn_shape_ = {batch_, seq_len_, cfg_.n_heads, cfg_.n_kv_heads, cfg_.d_head()};
  doc_start_.resize(size_t(batch_ * seq_len_));
  if (opts_.attn_tile_rows > 0) attn_shape_.tile_rows = opts_.attn_tile_rows;
  if (opts_.attn_tile_cols > 0) attn_shape_.tile_cols = opts_.attn_tile_cols;
  chunk_rows_ = opts_.logit_chunk_rows > 0 ? std::min(opts_.logit_chunk_rows, batch_ * seq_len_)
                                           : default_logit_chunk_rows(cfg_.vocab, n_threads_, batch_ * seq_len_);
  const auto held = held_names(opts_);
  for (const auto& name : frozen)
    if (!layout_.find(name) && !held.count(name)) fail("model: cannot freeze '{}': no such parameter", name);
  for (const auto& name : held)
    if (!frozen.count(name)) fail("model: '{}' is held quantized, so it must be frozen", name);
  if (!held.empty() && !std::is_same_v<T, float>) fail("model: quantized weights need a float model");
  size_band_scratch();
  BumpPlan<T> sizing;
  plan(sizing);
  planned_act_floats_ = sizing.used();
  if (!allocate) return;
  params_ = AlignedBuffer<T>(size_t(layout_.total()));
  grads_ = AlignedBuffer<T>(size_t(std::max<int64_t>(grad_layout_.total(), 1)));
  w_ = ModelWeights<T>::bind(layout_, cfg_, params_.data(), /*allow_missing=*/!held.empty());
  g_ = ModelWeights<T>::bind(grad_layout_, cfg_, grads_.data(), /*allow_missing=*/true);
  if (cfg_.donor_dim > 0) donor_ = AlignedBuffer<T>(size_t(cfg_.vocab * cfg_.donor_dim));
  if (bf16_) wbf16_ = AlignedBuffer<kernels::bf16>(size_t(layout_.total()));
  acts_ = AlignedBuffer<T>(size_t(planned_act_floats_));
  BumpPlan<T> carve(acts_.data());
  plan(carve);
  bind_layers();
  expert_picks_.assign(size_t(cfg_.n_experts), 0.0);
  expert_prob_sums_.assign(size_t(cfg_.n_experts), 0.0);
  d_balance_.assign(size_t(cfg_.n_experts), T(0));
  layer_rope_tables(cfg_, false, rope_cos_, rope_sin_, seq_len_);
  if (cfg_.sliding_window > 0) layer_rope_tables(cfg_, true, rope_cos_local_, rope_sin_local_, seq_len_);
  local_attn_shape_ = attn_shape_;
  window_start_.resize(doc_start_.size());
  set_documents(nullptr);
}

template <typename T>
void Transformer<T>::check_tokens(const int32_t* tokens, const char* what, bool allow_no_target) const {
  for (int64_t i = 0; i < batch_ * seq_len_; ++i)
    if ((tokens[i] < 0 || tokens[i] >= cfg_.vocab) && !(allow_no_target && tokens[i] == kernels::kNoTarget))
      fail("model: {} token {} at position {} is outside the vocabulary [0, {})", what, tokens[i], i, cfg_.vocab);
}

template <typename T>
void Transformer<T>::set_documents(const int32_t* doc_start) {
  attn_shape_.doc_start = nullptr;
  if (doc_start) {
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t t = 0; t < seq_len_; ++t) {
        const int32_t s = doc_start[b * seq_len_ + t];
        const int32_t prev = t > 0 ? doc_start[b * seq_len_ + t - 1] : 0;
        if (s < prev || s > t)
          fail("model: document start {} at position {} of row {} is not in [{}, {}]", s, t, b, prev, t);
      }
    std::copy(doc_start, doc_start + batch_ * seq_len_, doc_start_.begin());
    attn_shape_.doc_start = doc_start_.data();
  }
  if (cfg_.sliding_window == 0) return;
  // Both starts are non-decreasing along a row, so their maximum is too.
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < seq_len_; ++t) {
      const int64_t i = b * seq_len_ + t;
      window_start_[size_t(i)] = int32_t(std::max<int64_t>(doc_start ? doc_start[i] : 0, cfg_.window_first_key(t)));
    }
  local_attn_shape_.doc_start = window_start_.data();
}

template <typename T>
void Transformer<T>::check_threads() const {
  if (omp_get_max_threads() > n_threads_)
    fail("model: planned for {} threads, now running {}", n_threads_, omp_get_max_threads());
}

template <typename T>
void Transformer<T>::charge_time_to(OpProfile::Op op) {
  if (!profile_) return;
  const double t = now_seconds();
  profile_->seconds[phase_][op] += t - last_charge_s_;
  if (profile_layer_ >= 0) profile_->layer_seconds[size_t(profile_layer_)][profile_half_] += t - last_charge_s_;
  last_charge_s_ = t;
}

template <typename T>
GemmIn<T> Transformer<T>::gemm_in(T* dy, kernels::bf16* scratch, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (bf16_) {
      kernels::to_bf16(scratch, dy, n);
      return {nullptr, scratch};
    }
  }
  return {dy, nullptr};
}

// One projection of block l: its linear op (fp32, bf16, quantized bands),
// then its LoRA branch when it is a target. The block passes call only
// these two.
template <typename T>
void Transformer<T>::project(int64_t l, BlockMatrix t, T* out, const GemmIn<T>& in, OpProfile::Op op) {
  const nn::Linear<T>& p = proj_[size_t(l)][size_t(t)];
  p.forward_base(out, in, batch_ * seq_len_);
  charge_time_to(op);
  if (!p.has_lora()) return;
  p.forward_lora(out, in, batch_ * seq_len_);
  charge_time_to(OpProfile::kLora);
}

template <typename T>
void Transformer<T>::project_bwd(int64_t l, BlockMatrix t, T* din, const GemmIn<T>& dout, const GemmIn<T>& in,
                                 bool accumulate, OpProfile::Op op) {
  const nn::Linear<T>& p = proj_[size_t(l)][size_t(t)];
  p.backward_base(din, dout, in, batch_ * seq_len_, accumulate);
  charge_time_to(op);
  if (!p.has_lora()) return;
  p.backward_lora(din, dout, in, batch_ * seq_len_);
  charge_time_to(OpProfile::kLora);
}

template <typename T>
void Transformer<T>::post_norm_forward(T* out, T* rstd, const T* proj, const T* w) {
  rmsnorm_forward(out, rstd, proj, w, batch_ * seq_len_, cfg_.d_model, T(cfg_.rms_eps));
  charge_time_to(OpProfile::kNorm);
}

template <typename T>
void Transformer<T>::post_norm_backward(T* d_proj, T* dw, const T* d_out, const T* proj, const T* w, const T* rstd) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  std::fill(d_proj, d_proj + BT * C, T(0));  // rmsnorm_backward accumulates
  rmsnorm_backward(d_proj, dw, d_out, proj, w, rstd, BT, C);
  charge_time_to(OpProfile::kNorm);
}

template <typename T>
void Transformer<T>::half_forward(int64_t l, BlockHalf half, const T* x_in, T* x_out) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  const HalfBlock& h = recipes_[size_t(l)].halves[half];
  const auto& w = w_.layers[size_t(l)];
  auto& a = layer_acts_[size_t(l)];
  if (half == kMixerHalf) {
    with_pointer(a.h_attn,
                 [&](auto* hn) { rmsnorm_forward(hn, a.rstd_attn, x_in, w.norm[half], BT, C, T(cfg_.rms_eps)); });
    charge_time_to(OpProfile::kNorm);
  }
  const bool post_norm_again = h.post_norm && opts_.recompute == Recompute::kAll;
  if (!x_out && !post_norm_again) return sublayer_forward(l, h.sublayer, nullptr);
  T* out = h.post_norm ? post_norm_input(a, half) : x_out;
  sublayer_forward(l, h.sublayer, out);
  // recomputation only refreshes the post norm's rstd (into free d_normed_)
  if (h.post_norm) post_norm_forward(x_out ? x_out : d_normed_, post_norm_rstd(a, half), out, w.post_norm[half]);
  if (!x_out) return;
  if (half == kMixerHalf) {
    with_pointer(a.h_ffn, [&](auto* hn) {
      residual_rmsnorm_forward(x_out, hn, a.rstd_ffn, x_in, w.norm[kFfnHalf], BT, C, T(cfg_.rms_eps));
    });
    return charge_time_to(OpProfile::kNorm);
  }
  residual_forward(x_out, x_out, x_in, BT * C);
  charge_time_to(OpProfile::kResidual);
}

template <typename T>
void Transformer<T>::sublayer_forward(int64_t l, Sublayer s, T* out) {
  switch (s) {
    case Sublayer::kAttention: return attn_block_forward(l, out);
    case Sublayer::kShortConv: return conv_block_forward(l, out);
    case Sublayer::kGatedDeltaNet: return gdn_block_forward(l, out);
    case Sublayer::kDenseFfn: return dense_ffn_forward(l, out);
    case Sublayer::kExperts: return experts_forward(l, out);
  }
}

template <typename T>
void Transformer<T>::embed(const int32_t* inputs) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  if (cfg_.donor_dim > 0) {  // x = W E[token]: gather donor rows, then the lens GEMM
    embedding_forward(x_donor_, inputs, donor_.data(), BT, cfg_.donor_dim);
    lens_.forward_base(residual_[0], {x_donor_, nullptr}, BT);
  } else {
    token_embd_.forward(residual_[0], inputs, BT);
  }
  if (cfg_.architecture().embedding_scale) scale_inplace(residual_[0], embedding_scale(), BT * C);
  charge_time_to(OpProfile::kEmbedding);
}

template <typename T>
void Transformer<T>::embed_and_blocks(const int32_t* inputs, const int32_t* doc_start) {
  check_threads();
  check_tokens(inputs, "input", false);
  set_documents(doc_start);
  inputs_ = inputs;
  targets_ = nullptr;
  phase_ = OpProfile::kForward;
  charge_block(-1, kMixerHalf);  // even after a pass an exception cut short
  if (profile_) last_charge_s_ = now_seconds();
  if (bf16_) refresh_bf16_shadow();
  embed(inputs);
  std::fill(expert_picks_.begin(), expert_picks_.end(), 0.0);
  std::fill(expert_prob_sums_.begin(), expert_prob_sums_.end(), 0.0);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    T* x_mid = layer_acts_[size_t(l)].x_mid;
    charge_block(l, kMixerHalf);
    half_forward(l, kMixerHalf, residual_[size_t(l)], x_mid);
    charge_block(l, kFfnHalf);
    half_forward(l, kFfnHalf, x_mid, residual_[size_t(l + 1)]);
  }
  charge_block(-1, kMixerHalf);
  aux_loss_ = load_balancing_loss();
  with_pointer(h_final_, [&](auto* h) {
    rmsnorm_forward(h, rstd_final_, residual_.back(), w_.output_norm, batch_ * seq_len_, cfg_.d_model, T(cfg_.rms_eps));
  });
  charge_time_to(OpProfile::kNorm);
}

// The optimizer may have changed the trainable weights since the last
// forward. A LoRA run's base is frozen from its setup on, so its rounding is
// made once, at the first forward; other runs round every tensor each time
// (their frozen tensors are few, and QAT rewrites them inside a step).
template <typename T>
void Transformer<T>::refresh_bf16_shadow() {
  if constexpr (std::is_same_v<T, float>) {
    if (cfg_.lora.rank == 0 || !frozen_bf16_ready_) {
      kernels::to_bf16(wbf16_.data(), params_.data(), layout_.total());
      frozen_bf16_ready_ = true;
    } else {
      for (const ParamTensor& t : grad_layout_.tensors())
        kernels::to_bf16(wbf16_.data() + t.source_offset, params_.data() + t.source_offset, t.size);
    }
    charge_time_to(OpProfile::kEmbedding);
  }
}

template <typename T>
T Transformer<T>::load_balancing_loss() const {
  if (!cfg_.has_experts()) return T(0);
  const double n_all = double(batch_ * seq_len_) * double(cfg_.n_layers);
  double sum = 0;
  for (size_t e = 0; e < expert_picks_.size(); ++e) sum += expert_picks_[e] / n_all * (expert_prob_sums_[e] / n_all);
  return T(double(cfg_.n_experts) * sum);
}

// The rows the head runs on: every row, or with `targeted_only` the rows
// that have a target (a masked prompt or padding then costs no head GEMM).
template <typename T>
void Transformer<T>::select_head_rows(bool targeted_only) {
  const int64_t BT = batch_ * seq_len_;
  head_rows_.clear();
  for (int64_t i = 0; i < BT; ++i)
    if (!targeted_only || targets_[i] != kernels::kNoTarget) head_rows_.push_back(i);
}

// Rows `first`.. of head_rows_ as one contiguous chunk: h_final_'s own rows
// when they are consecutive, else gathered (with their targets) into the
// chunk's buffers.
template <typename T>
typename Transformer<T>::HeadChunk Transformer<T>::head_chunk(int64_t first, int64_t rows) {
  const int64_t C = cfg_.d_model, r0 = head_rows_[size_t(first)];
  if (head_rows_[size_t(first + rows - 1)] - r0 == rows - 1)
    return {h_final_.at(r0 * C), targets_ + r0, losses_ + r0, lse_ + r0, d_h_final_ + r0 * C, false};
  const int64_t* idx = head_rows_.data() + first;
  auto gather = [&](auto* dst, const auto* src) {
#pragma omp parallel for schedule(static) if (rows * C >= kMinParallelWork)
    for (int64_t i = 0; i < rows; ++i) std::copy(src + idx[i] * C, src + (idx[i] + 1) * C, dst + i * C);
  };
  if (h_final_.bf16) gather(head_h_.bf16, h_final_.bf16);
  else gather(head_h_.fp32, h_final_.fp32);
  for (int64_t i = 0; i < rows; ++i) head_targets_[size_t(i)] = targets_[idx[i]];
  return {head_h_, head_targets_.data(), head_losses_, head_lse_, head_dh_, true};
}

// Puts a gathered chunk's losses, log-sum-exps and d(h) back on their rows.
template <typename T>
void Transformer<T>::scatter_head_chunk(const HeadChunk& c, int64_t first, int64_t rows, bool with_gradient) {
  const int64_t C = cfg_.d_model;
  const int64_t* idx = head_rows_.data() + first;
  for (int64_t i = 0; i < rows; ++i) losses_[idx[i]] = c.losses[i], lse_[idx[i]] = c.lse[i];
  if (!with_gradient) return;
#pragma omp parallel for schedule(static) if (rows * C >= kMinParallelWork)
  for (int64_t i = 0; i < rows; ++i) std::copy(c.d_h + i * C, c.d_h + (i + 1) * C, d_h_final_ + idx[i] * C);
}

// The loss over chunks of the head's rows. Rows without a target skip the
// head: their loss is 0 and, with `prepare_backward`, so is their d(h).
template <typename T>
T Transformer<T>::head_loss(bool prepare_backward, bool targeted_only) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model, V = cfg_.vocab;
  counted_targets_ = BT - std::count(targets_, targets_ + BT, kernels::kNoTarget);
  const T dloss = counted_targets_ > 0 ? T(1) / T(counted_targets_) : T(0);
  if (prepare_backward && d_head_) std::memset(d_head_, 0, size_t(V * C) * sizeof(T));
  select_head_rows(targeted_only);
  const int64_t n_rows = int64_t(head_rows_.size());
  if (n_rows < BT) {
    std::fill(losses_, losses_ + BT, T(0));
    std::fill(lse_, lse_ + BT, T(0));
    if (prepare_backward) std::fill(d_h_final_, d_h_final_ + BT * C, T(0));
  }
  for (int64_t first = 0; first < n_rows; first += chunk_rows_) {
    const int64_t rows = std::min(chunk_rows_, n_rows - first);
    const HeadChunk c = head_chunk(first, rows);
    head_.forward_base(logit_chunk_, c.h, rows);
    charge_time_to(OpProfile::kHead);
    if (!prepare_backward) {
      cross_entropy_forward(c.losses, c.lse, logit_chunk_, c.targets, rows, V);
      if (c.gathered) scatter_head_chunk(c, first, rows, false);
      charge_time_to(OpProfile::kLoss);
      continue;
    }
    // The chunk's logits become d(mean loss)/d(logits), then flow through
    // the head at once: no logits outlive their chunk.
    cross_entropy_fused(c.losses, c.lse, logit_chunk_, c.targets, rows, V, dloss);
    charge_time_to(OpProfile::kLoss);
    phase_ = OpProfile::kBackward;
    const GemmIn<T> d_logits = gemm_in(logit_chunk_, logit_chunk_h_, rows * V);
    head_.backward_base(c.d_h, d_logits, c.h, rows, false);
    if (c.gathered) scatter_head_chunk(c, first, rows, true);
    charge_time_to(OpProfile::kHead);
    phase_ = OpProfile::kForward;
  }
  double sum = 0;  // in order: deterministic whatever the thread count
  for (int64_t i = 0; i < BT; ++i) sum += double(losses_[i]);
  return counted_targets_ > 0 ? T(sum / double(counted_targets_)) : T(0);
}

template <typename T>
T Transformer<T>::forward(const int32_t* inputs, const int32_t* targets, const int32_t* doc_start) {
  const int64_t BT = batch_ * seq_len_, V = cfg_.vocab;
  if (targets) check_tokens(targets, "target", true);
  embed_and_blocks(inputs, doc_start);
  if (!targets) {
    if (!logits_.size()) logits_ = AlignedBuffer<T>(size_t(BT * V));
    head_.forward_base(logits_.data(), h_final_, BT);
    charge_time_to(OpProfile::kHead);
    return T(0);
  }
  targets_ = targets;
  scored_targets_ = nullptr;
  return head_loss(true, true);
}

template <typename T>
void Transformer<T>::forward_scores(const int32_t* inputs, const int32_t* targets, const int32_t* doc_start) {
  check_tokens(targets, "target", true);
  embed_and_blocks(inputs, doc_start);
  targets_ = targets;
  head_loss(false, false);  // every row: callers read the logits of rows without a target too
  targets_ = nullptr;  // backward_weighted() prepares the head's gradients
  scored_targets_ = targets;
}

// The head again, chunk by chunk: the same logits (the same GEMM on the same
// h_final_), turned into d_token_loss[i] * (softmax - onehot) with the
// log-sum-exp forward_scores() saved.
template <typename T>
void Transformer<T>::backward_weighted(const T* d_token_loss) {
  if (!scored_targets_) fail("model: backward_weighted() needs a forward_scores()");
  const int64_t V = cfg_.vocab;
  const int32_t* targets = scored_targets_;
  backward_logits([&](int64_t r0, int64_t rows, T* logits) {
    cross_entropy_backward_weighted(logits, lse_ + r0, targets + r0, rows, V, d_token_loss + r0);
  });
}

template <typename T>
void Transformer<T>::visit_logits(const LogitChunkFn& f) {
  if (!scored_targets_) fail("model: visit_logits() needs a forward_scores()");
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  for (int64_t r0 = 0; r0 < BT; r0 += chunk_rows_) {
    const int64_t rows = std::min(chunk_rows_, BT - r0);
    head_.forward_base(logit_chunk_, h_final_.at(r0 * C), rows);
    charge_time_to(OpProfile::kHead);
    f(r0, rows, logit_chunk_);
    charge_time_to(OpProfile::kLoss);
  }
}

// Each chunk's gradient flows through the head at once: no logits outlive
// their chunk.
template <typename T>
void Transformer<T>::backward_logits(const LogitChunkFn& to_d_logits) {
  if (!scored_targets_) fail("model: backward_logits() needs a forward_scores()");
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model, V = cfg_.vocab;
  targets_ = scored_targets_;
  scored_targets_ = nullptr;
  if (d_head_) std::memset(d_head_, 0, size_t(V * C) * sizeof(T));
  phase_ = OpProfile::kBackward;
  for (int64_t r0 = 0; r0 < BT; r0 += chunk_rows_) {
    const int64_t rows = std::min(chunk_rows_, BT - r0);
    const GemmIn<T> h = h_final_.at(r0 * C);
    head_.forward_base(logit_chunk_, h, rows);
    charge_time_to(OpProfile::kHead);
    to_d_logits(r0, rows, logit_chunk_);
    charge_time_to(OpProfile::kLoss);
    const GemmIn<T> d_logits = gemm_in(logit_chunk_, logit_chunk_h_, rows * V);
    head_.backward_base(d_h_final_ + r0 * C, d_logits, h, rows, false);
    charge_time_to(OpProfile::kHead);
  }
  backward();
}

template <typename T>
T Transformer<T>::evaluate(const int32_t* inputs, const int32_t* targets, const int32_t* doc_start) {
  check_tokens(targets, "target", true);
  embed_and_blocks(inputs, doc_start);
  targets_ = targets;
  const T loss = head_loss(false, true);
  targets_ = scored_targets_ = nullptr;  // nothing prepared for backward()
  return loss;
}

template <typename T>
void Transformer<T>::zero_grad() {
  std::memset(grads_.data(), 0, grads_.size() * sizeof(T));
}

template <typename T>
void Transformer<T>::layer_backward(int64_t l, const T* x_in, T* d_res) {
  T* x_mid = layer_acts_[size_t(l)].x_mid;
  if (opts_.recompute == Recompute::kAll) {  // the whole block again, but its output
    phase_ = OpProfile::kRecompute;
    charge_block(l, kMixerHalf);
    half_forward(l, kMixerHalf, x_in, x_mid);
    charge_block(l, kFfnHalf);
    half_forward(l, kFfnHalf, x_mid, nullptr);
    phase_ = OpProfile::kBackward;
  }
  charge_block(l, kFfnHalf);
  half_backward(l, kFfnHalf, x_mid, d_res);
  charge_block(l, kMixerHalf);
  if (opts_.recompute == Recompute::kAttn) {
    phase_ = OpProfile::kRecompute;
    half_forward(l, kMixerHalf, x_in, nullptr);
    phase_ = OpProfile::kBackward;
  }
  half_backward(l, kMixerHalf, x_in, d_res);
}

// Through the post norm (into d_normed_, free until the sublayer's
// backward has read it), the sublayer, whose backward leaves dL/d(its
// normed input) in d_normed_, and the input norm, which adds dL/d(x_in) to
// d_res.
template <typename T>
void Transformer<T>::half_backward(int64_t l, BlockHalf half, const T* x_in, T* d_res) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  const HalfBlock& h = recipes_[size_t(l)].halves[half];
  const auto& w = w_.layers[size_t(l)];
  const auto& g = g_.layers[size_t(l)];
  const auto& a = layer_acts_[size_t(l)];
  T* d_out = d_res;
  if (h.post_norm) {
    post_norm_backward(d_normed_, g.post_norm[half], d_res, post_norm_input(a, half), w.post_norm[half],
                       post_norm_rstd(a, half));
    d_out = d_normed_;
  }
  sublayer_backward(l, h.sublayer, d_out);
  rmsnorm_backward(d_res, g.norm[half], d_normed_, x_in, w.norm[half], half == kMixerHalf ? a.rstd_attn : a.rstd_ffn,
                   BT, C);
  charge_time_to(OpProfile::kNorm);
}

template <typename T>
void Transformer<T>::sublayer_backward(int64_t l, Sublayer s, T* d_out) {
  switch (s) {
    case Sublayer::kAttention: return attn_block_backward(l, d_out);
    case Sublayer::kShortConv: return conv_block_backward(l, d_out);
    case Sublayer::kGatedDeltaNet: return gdn_block_backward(l, d_out);
    case Sublayer::kDenseFfn: return dense_ffn_backward(l, d_out);
    case Sublayer::kExperts: return experts_backward(l, d_out);
  }
}

template <typename T>
void Transformer<T>::backward(T loss_scale) {
  if (!targets_) fail("model: backward() needs a forward() with targets");
  check_threads();
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model, V = cfg_.vocab;
  phase_ = OpProfile::kBackward;
  charge_block(-1, kMixerHalf);
  if (profile_) last_charge_s_ = now_seconds();
  loss_scale_ = loss_scale;  // the load-balancing loss's gradient scales with it
  // forward() left the head's gradients at unit loss scale; both are linear in it
  if (d_head_) axpy(g_.output, loss_scale, d_head_, V * C);
  if (loss_scale != T(1)) scale_inplace(d_h_final_, loss_scale, BT * C);
  charge_time_to(OpProfile::kHead);
  std::memset(d_res_, 0, size_t(BT * C) * sizeof(T));
  rmsnorm_backward(d_res_, g_.output_norm, d_h_final_, residual_.back(), w_.output_norm, rstd_final_, BT, C);
  charge_time_to(OpProfile::kNorm);
  for (int64_t l = cfg_.n_layers - 1; l >= 0; --l) {
    layer_backward(l, residual_[size_t(l)], d_res_);
    if (on_layer_grads) on_layer_grads(l);
    if (profile_) last_charge_s_ = now_seconds();  // the hook's time is not the model's
  }
  charge_block(-1, kMixerHalf);
  if (cfg_.architecture().embedding_scale) scale_inplace(d_res_, embedding_scale(), BT * C);
  if (cfg_.donor_dim > 0)  // E is frozen: only the lens gets a gradient
    lens_.backward_base(nullptr, {d_res_, nullptr}, {x_donor_, nullptr}, BT, false);
  else token_embd_.backward(d_res_, inputs_, BT);
  charge_time_to(OpProfile::kEmbedding);
  targets_ = nullptr;  // once per forward: the head's prepared gradients are used up
}

template class Transformer<float>;
template class Transformer<double>;

}  // namespace ggtrain::model
