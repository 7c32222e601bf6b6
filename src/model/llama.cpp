#include "model/llama.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/lora.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "util/error.h"

namespace ggtrain::model {

using namespace ggtrain::kernels;

template <typename T>
LlamaModel<T>::LlamaModel(const LlamaConfig& cfg, int64_t batch, int64_t seq_len,
                          const std::set<std::string>& frozen)
    : cfg_(cfg), layout_(cfg), grad_layout_(layout_.trainable(frozen)), B_(batch), T_(seq_len),
      n_threads_(omp_get_max_threads()) {
  cfg_.validate("model config");
  if (B_ <= 0 || T_ <= 0) fail("model: batch {} and seq_len {} must be positive", B_, T_);
  if (T_ > cfg_.ctx) fail("model: seq_len {} exceeds the context length {}", T_, cfg_.ctx);
  attn_shape_ = {B_, T_, cfg_.n_heads, cfg_.n_kv_heads, cfg_.d_head()};
  params_ = AlignedBuffer<T>(size_t(layout_.total()));
  for (const auto& name : frozen)
    if (!layout_.find(name)) fail("model: cannot freeze '{}': no such parameter", name);
  grads_ = AlignedBuffer<T>(size_t(std::max<int64_t>(grad_layout_.total(), 1)));
  w_ = ModelWeights<T>::bind(layout_, cfg_, params_.data());
  g_ = ModelWeights<T>::bind(grad_layout_, cfg_, grads_.data(), /*allow_missing=*/true);
  if (cfg_.donor_dim > 0) donor_ = AlignedBuffer<T>(size_t(cfg_.vocab * cfg_.donor_dim));
  BumpPlan<T> sizing;
  plan(sizing);
  acts_ = AlignedBuffer<T>(size_t(sizing.used()));
  BumpPlan<T> carve(acts_.data());
  plan(carve);
  rope_tables(rope_cos_, rope_sin_, T_, cfg_.d_head(), cfg_.rope_freq_base);
}

// Lays out every activation and scratch buffer. Called twice: to size the
// single allocation, then to point into it.
template <typename T>
void LlamaModel<T>::plan(BumpPlan<T>& p) {
  const int64_t BT = B_ * T_, C = cfg_.d_model, F = cfg_.d_ff;
  const int64_t QD = cfg_.q_dim(), KD = cfg_.kv_dim();
  residual_.assign(size_t(cfg_.n_layers + 1), nullptr);
  for (auto& r : residual_) r = p.take(BT * C);
  if (cfg_.donor_dim > 0) x_donor_ = p.take(BT * cfg_.donor_dim);
  layer_acts_.assign(size_t(cfg_.n_layers), {});
  for (auto& a : layer_acts_) {
    a.rstd_attn = p.take(BT);
    a.h_attn = p.take(BT * C);
    a.q = p.take(BT * QD);
    a.k = p.take(BT * KD);
    a.v = p.take(BT * KD);
    a.att = p.take(B_ * cfg_.n_heads * T_ * T_);
    a.attn_out = p.take(BT * QD);
    a.x_mid = p.take(BT * C);
    a.rstd_ffn = p.take(BT);
    a.h_ffn = p.take(BT * C);
    a.gate = p.take(BT * F);
    a.up = p.take(BT * F);
    a.act = p.take(BT * F);
    for (const auto& target : cfg_.lora.targets)
      for (int t = 0; t < kNumLoraTargets; ++t)
        if (target == lora_target_name(LoraTarget(t))) a.lora_u[size_t(t)] = p.take(BT * cfg_.lora.rank);
  }
  rstd_final_ = p.take(BT);
  h_final_ = p.take(BT * C);
  logits_ = p.take(BT * cfg_.vocab);
  lse_ = p.take(BT);
  losses_ = p.take(BT);
  rope_cos_ = p.take(T_ * cfg_.d_head() / 2);
  rope_sin_ = p.take(T_ * cfg_.d_head() / 2);
  d_res_ = p.take(BT * C);
  d_h_ = p.take(BT * C);
  d_q_ = p.take(BT * QD);
  d_k_ = p.take(BT * KD);
  d_v_ = p.take(BT * KD);
  d_attn_out_ = p.take(BT * QD);
  d_gate_ = p.take(BT * F);
  d_up_ = p.take(BT * F);
  d_act_ = p.take(BT * F);
  d_scores_ = p.take(int64_t(n_threads_) * attention_scratch_per_thread(T_));
  if (cfg_.lora.rank > 0) d_lora_u_ = p.take(BT * cfg_.lora.rank);
}

template <typename T>
void LlamaModel<T>::check_tokens(const int32_t* tokens, const char* what) const {
  for (int64_t i = 0; i < B_ * T_; ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg_.vocab)
      fail("model: {} token {} at position {} is outside the vocabulary [0, {})", what,
           tokens[i], i, cfg_.vocab);
}

template <typename T>
void LlamaModel<T>::lora_fwd(int64_t l, LoraTarget t, T* out, const T* inp, int64_t n_in, int64_t n_out) {
  const auto& w = w_.layers[size_t(l)];
  if (!w.lora_a[t]) return;
  lora_forward(out, layer_acts_[size_t(l)].lora_u[t], inp, w.lora_a[t], w.lora_b[t], B_ * T_, n_in, n_out,
               cfg_.lora.rank, T(cfg_.lora.scale()));
}

template <typename T>
void LlamaModel<T>::lora_bwd(int64_t l, LoraTarget t, T* dinp, const T* dout, const T* inp, int64_t n_in,
                             int64_t n_out) {
  const auto& w = w_.layers[size_t(l)];
  if (!w.lora_a[t]) return;
  const auto& g = g_.layers[size_t(l)];
  lora_backward(dinp, g.lora_a[t], g.lora_b[t], d_lora_u_, dout, inp, layer_acts_[size_t(l)].lora_u[t],
                w.lora_a[t], w.lora_b[t], B_ * T_, n_in, n_out, cfg_.lora.rank, T(cfg_.lora.scale()));
}

template <typename T>
void LlamaModel<T>::layer_forward(int64_t l, const T* x_in, T* x_out) {
  const int64_t BT = B_ * T_, C = cfg_.d_model, F = cfg_.d_ff;
  const int64_t QD = cfg_.q_dim(), KD = cfg_.kv_dim(), hd = cfg_.d_head();
  const auto& w = w_.layers[size_t(l)];
  auto& a = layer_acts_[size_t(l)];
  const T eps = T(cfg_.rms_eps);
  // attention block: x_mid = x_in + Wo * attn(rope(Wq h), rope(Wk h), Wv h)
  rmsnorm_forward(a.h_attn, a.rstd_attn, x_in, w.attn_norm, BT, C, eps);
  linear_forward(a.q, a.h_attn, w.wq, BT, C, QD);
  lora_fwd(l, kAttnQ, a.q, a.h_attn, C, QD);
  linear_forward(a.k, a.h_attn, w.wk, BT, C, KD);
  lora_fwd(l, kAttnK, a.k, a.h_attn, C, KD);
  linear_forward(a.v, a.h_attn, w.wv, BT, C, KD);
  lora_fwd(l, kAttnV, a.v, a.h_attn, C, KD);
  rope_forward(a.q, rope_cos_, rope_sin_, B_, T_, cfg_.n_heads, hd);
  rope_forward(a.k, rope_cos_, rope_sin_, B_, T_, cfg_.n_kv_heads, hd);
  attention_forward(a.attn_out, a.att, a.q, a.k, a.v, attn_shape_);
  linear_forward(a.x_mid, a.attn_out, w.wo, BT, QD, C);
  lora_fwd(l, kAttnOutput, a.x_mid, a.attn_out, QD, C);
  residual_forward(a.x_mid, a.x_mid, x_in, BT * C);
  // feed-forward block: x_out = x_mid + W_down (silu(W_gate h) * W_up h)
  rmsnorm_forward(a.h_ffn, a.rstd_ffn, a.x_mid, w.ffn_norm, BT, C, eps);
  linear_forward(a.gate, a.h_ffn, w.w_gate, BT, C, F);
  lora_fwd(l, kFfnGate, a.gate, a.h_ffn, C, F);
  linear_forward(a.up, a.h_ffn, w.w_up, BT, C, F);
  lora_fwd(l, kFfnUp, a.up, a.h_ffn, C, F);
  swiglu_forward(a.act, a.gate, a.up, BT * F);
  linear_forward(x_out, a.act, w.w_down, BT, F, C);
  lora_fwd(l, kFfnDown, x_out, a.act, F, C);
  residual_forward(x_out, x_out, a.x_mid, BT * C);
}

template <typename T>
T LlamaModel<T>::forward(const int32_t* inputs, const int32_t* targets) {
  const int64_t BT = B_ * T_, C = cfg_.d_model, V = cfg_.vocab;
  check_tokens(inputs, "input");
  if (targets) check_tokens(targets, "target");
  inputs_ = inputs;
  targets_ = targets;
  if (cfg_.donor_dim > 0) {  // x = W E[token]: gather donor rows, then the lens GEMM
    embedding_forward(x_donor_, inputs, donor_.data(), BT, cfg_.donor_dim);
    linear_forward(residual_[0], x_donor_, w_.lens, BT, cfg_.donor_dim, C);
  } else {
    embedding_forward(residual_[0], inputs, w_.token_embd, BT, C);
  }
  for (int64_t l = 0; l < cfg_.n_layers; ++l)
    layer_forward(l, residual_[size_t(l)], residual_[size_t(l + 1)]);
  rmsnorm_forward(h_final_, rstd_final_, residual_.back(), w_.output_norm, BT, C,
                  T(cfg_.rms_eps));
  linear_forward(logits_, h_final_, w_.output, BT, C, V);
  if (!targets) return T(0);
  cross_entropy_forward(losses_, lse_, logits_, targets, BT, V);
  double sum = 0;  // in order: deterministic whatever the thread count
  for (int64_t i = 0; i < BT; ++i) sum += double(losses_[i]);
  return T(sum / double(BT));
}

template <typename T>
void LlamaModel<T>::zero_grad() {
  std::memset(grads_.data(), 0, grads_.size() * sizeof(T));
}

template <typename T>
void LlamaModel<T>::layer_backward(int64_t l, const T* x_in, T* d_res) {
  const int64_t BT = B_ * T_, C = cfg_.d_model, F = cfg_.d_ff;
  const int64_t QD = cfg_.q_dim(), KD = cfg_.kv_dim(), hd = cfg_.d_head();
  const auto& w = w_.layers[size_t(l)];
  const auto& g = g_.layers[size_t(l)];
  const auto& a = layer_acts_[size_t(l)];
  // feed-forward block; d_res is dL/d(x_out) and becomes dL/d(x_mid)
  linear_backward(d_act_, g.w_down, d_res, a.act, w.w_down, BT, F, C, false);
  lora_bwd(l, kFfnDown, d_act_, d_res, a.act, F, C);
  swiglu_backward(d_gate_, d_up_, d_act_, a.gate, a.up, BT * F);
  linear_backward(d_h_, g.w_gate, d_gate_, a.h_ffn, w.w_gate, BT, C, F, false);
  lora_bwd(l, kFfnGate, d_h_, d_gate_, a.h_ffn, C, F);
  linear_backward(d_h_, g.w_up, d_up_, a.h_ffn, w.w_up, BT, C, F, true);
  lora_bwd(l, kFfnUp, d_h_, d_up_, a.h_ffn, C, F);
  rmsnorm_backward(d_res, g.ffn_norm, d_h_, a.x_mid, w.ffn_norm, a.rstd_ffn, BT, C);
  // attention block; d_res becomes dL/d(x_in)
  linear_backward(d_attn_out_, g.wo, d_res, a.attn_out, w.wo, BT, QD, C, false);
  lora_bwd(l, kAttnOutput, d_attn_out_, d_res, a.attn_out, QD, C);
  attention_backward(d_q_, d_k_, d_v_, d_scores_, d_attn_out_, a.q, a.k, a.v, a.att, attn_shape_);
  rope_backward(d_q_, rope_cos_, rope_sin_, B_, T_, cfg_.n_heads, hd);
  rope_backward(d_k_, rope_cos_, rope_sin_, B_, T_, cfg_.n_kv_heads, hd);
  linear_backward(d_h_, g.wq, d_q_, a.h_attn, w.wq, BT, C, QD, false);
  lora_bwd(l, kAttnQ, d_h_, d_q_, a.h_attn, C, QD);
  linear_backward(d_h_, g.wk, d_k_, a.h_attn, w.wk, BT, C, KD, true);
  lora_bwd(l, kAttnK, d_h_, d_k_, a.h_attn, C, KD);
  linear_backward(d_h_, g.wv, d_v_, a.h_attn, w.wv, BT, C, KD, true);
  lora_bwd(l, kAttnV, d_h_, d_v_, a.h_attn, C, KD);
  rmsnorm_backward(d_res, g.attn_norm, d_h_, x_in, w.attn_norm, a.rstd_attn, BT, C);
}

template <typename T>
void LlamaModel<T>::backward(T loss_scale) {
  if (!targets_) fail("model: backward() needs a forward() with targets");
  if (omp_get_max_threads() > n_threads_)
    fail("model: planned for {} threads, now running {}", n_threads_, omp_get_max_threads());
  const int64_t BT = B_ * T_, C = cfg_.d_model, V = cfg_.vocab;
  cross_entropy_backward_inplace(logits_, lse_, targets_, BT, V, loss_scale / T(BT));
  T* d_logits = logits_;
  std::memset(d_res_, 0, size_t(BT * C) * sizeof(T));
  linear_backward(d_h_, g_.output, d_logits, h_final_, w_.output, BT, C, V, false);
  rmsnorm_backward(d_res_, g_.output_norm, d_h_, residual_.back(), w_.output_norm, rstd_final_,
                   BT, C);
  for (int64_t l = cfg_.n_layers - 1; l >= 0; --l) {
    layer_backward(l, residual_[size_t(l)], d_res_);
    if (on_layer_grads) on_layer_grads(l);
  }
  if (cfg_.donor_dim > 0)  // E is frozen: only the lens gets a gradient
    linear_backward<T>(nullptr, g_.lens, d_res_, x_donor_, w_.lens, BT, cfg_.donor_dim, C, false);
  else if (g_.token_embd)
    embedding_backward(g_.token_embd, d_res_, inputs_, BT, C);
  targets_ = nullptr;  // the logits now hold their gradient
}

template class LlamaModel<float>;
template class LlamaModel<double>;

}  // namespace ggtrain::model
