// The attention sublayer (Sublayer::kAttention) of the training passes: its
// activations, forward and backward. Every family's attention is here:
// grouped heads, RoPE on all or part of each head (or none, NoPE layers),
// sliding windows, q/k norms, q/k/v biases, and Qwen3.5's output gate.
#include <cmath>
#include <type_traits>

#include "kernels/attention_bf16.h"
#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "model/family_ops.h"
#include "model/transformer.h"

namespace ggtrain::model {

using namespace ggtrain::kernels;

// The activations an attention layer keeps for its backward.
template <typename T>
void Transformer<T>::plan_attention_acts(BumpPlan<T>& p, LayerActs<T>& a) {
  const int64_t BT = batch_ * seq_len_, QD = cfg_.q_dim(), KD = cfg_.kv_dim();
  a.q = p.take(BT * QD);
  a.k = p.take(BT * KD);
  a.v = p.take(BT * KD);
  a.lse = p.take(BT * cfg_.n_heads);
  a.attn_out = take_gemm_in(p, BT * QD);
  if (cfg_.architecture().qk_norm) {
    a.q_raw = p.take(BT * QD);
    a.k_raw = p.take(BT * KD);
    a.rstd_q = p.take(BT * cfg_.n_heads);
    a.rstd_k = p.take(BT * cfg_.n_kv_heads);
  }
  if (gated_attention()) {
    a.q_full = p.take(BT * 2 * QD);
    a.attn_gate = p.take(BT * QD);
    a.attn_o = p.take(BT * QD);
  }
}

// out = Wo attn(rope(Wq h), rope(Wk h), Wv h) of the normed input h
// (h_attn). With out null (recomputation for backward) it stops after
// attention.
template <typename T>
void Transformer<T>::attn_block_forward(int64_t l, T* out) {
  const int64_t BT = batch_ * seq_len_;
  const int64_t QD = cfg_.q_dim(), KD = cfg_.kv_dim(), hd = cfg_.d_head();
  const auto& w = w_.layers[size_t(l)];
  auto& a = layer_acts_[size_t(l)];
  if (gated_attention()) {  // attn_q yields the queries and the output gate
    project(l, kAttnQ, a.q_full, a.h_attn, OpProfile::kQkv);
    split_query_gate(qk_norm() ? a.q_raw : a.q, a.attn_gate, a.q_full, BT * cfg_.n_heads, hd);
  } else {
    project(l, kAttnQ, qk_norm() ? a.q_raw : a.q, a.h_attn, OpProfile::kQkv);
  }
  project(l, kAttnK, qk_norm() ? a.k_raw : a.k, a.h_attn, OpProfile::kQkv);
  project(l, kAttnV, a.v, a.h_attn, OpProfile::kQkv);
  if (w.bq) {  // Architecture::qkv_bias
    bias_forward(qk_norm() ? a.q_raw : a.q, w.bq, BT, QD);
    bias_forward(qk_norm() ? a.k_raw : a.k, w.bk, BT, KD);
    bias_forward(a.v, w.bv, BT, KD);
  }
  if (qk_norm()) {  // each head's row of d_head normed on its own (or each token's whole row)
    const int64_t qn = cfg_.q_norm_dim(), kn = cfg_.k_norm_dim();
    rmsnorm_forward(a.q, a.rstd_q, a.q_raw, w.attn_q_norm, BT * QD / qn, qn, T(cfg_.rms_eps));
    rmsnorm_forward(a.k, a.rstd_k, a.k_raw, w.attn_k_norm, BT * KD / kn, kn, T(cfg_.rms_eps));
    charge_time_to(OpProfile::kNorm);
  }
  if (cfg_.uses_rope(l)) {
    const int64_t n_rot = cfg_.n_rot();
    rope_forward(a.q, rope_cos(l), rope_sin(l), batch_, seq_len_, cfg_.n_heads, hd, rope_halves(), n_rot);
    rope_forward(a.k, rope_cos(l), rope_sin(l), batch_, seq_len_, cfg_.n_kv_heads, hd, rope_halves(), n_rot);
    charge_time_to(OpProfile::kRope);
  }
  auto attend = [&](auto* o) {
    if constexpr (std::is_same_v<T, float>) {
      if (bf16_attention()) return attention_forward_bf16(o, a.lse, attn_scratch_, a.q, a.k, a.v, attn_shape(l));
    }
    attention_forward(o, a.lse, attn_scratch_, a.q, a.k, a.v, attn_shape(l));
  };
  if (gated_attention()) {
    attend(a.attn_o);
    with_pointer(a.attn_out, [&](auto* out) { apply_output_gate(out, a.attn_o, a.attn_gate, BT * QD); });
  } else {
    with_pointer(a.attn_out, attend);
  }
  charge_time_to(OpProfile::kAttention);
  if (!out) return;
  project(l, kAttnOutput, out, a.attn_out, OpProfile::kAttnOutput);
}

// d_attn_out_ holds d(attn_out); it becomes d(o), and d(gate) goes to d_attn_gate_.
template <typename T>
void Transformer<T>::output_gate_backward(const LayerActs<T>& a) {
  const int64_t n = batch_ * seq_len_ * cfg_.q_dim();
#pragma omp parallel for schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) {
    const T sig = T(1) / (T(1) + std::exp(-a.attn_gate[i]));
    d_attn_gate_[i] = d_attn_out_[i] * a.attn_o[i] * sig * (T(1) - sig);
    d_attn_out_[i] *= sig;
  }
}

template <typename T>
void Transformer<T>::join_query_gate_grad(const T* d_q) {
  const int64_t rows = batch_ * seq_len_ * cfg_.n_heads, hd = cfg_.d_head();
#pragma omp parallel for schedule(static) if (rows * hd >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(d_q + r * hd, d_q + (r + 1) * hd, d_q_full_ + 2 * r * hd);
    std::copy(d_attn_gate_ + r * hd, d_attn_gate_ + (r + 1) * hd, d_q_full_ + (2 * r + 1) * hd);
  }
}

template <typename T>
void Transformer<T>::attn_block_backward(int64_t l, T* d_out) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  const int64_t QD = cfg_.q_dim(), KD = cfg_.kv_dim(), hd = cfg_.d_head();
  const auto& w = w_.layers[size_t(l)];
  const auto& g = g_.layers[size_t(l)];
  const auto& a = layer_acts_[size_t(l)];
  project_bwd(l, kAttnOutput, d_attn_out_, gemm_in(d_out, d_res_h_, BT * C), a.attn_out, false, OpProfile::kAttnOutput);
  auto attend_back = [&](const auto* o) {
    if constexpr (std::is_same_v<T, float>) {
      if (bf16_attention())
        return attention_backward_bf16(d_q_, d_k_, d_v_, attn_scratch_, d_attn_out_, o, a.lse, a.q, a.k, a.v,
                                       attn_shape(l));
    }
    attention_backward(d_q_, d_k_, d_v_, attn_scratch_, d_attn_out_, o, a.lse, a.q, a.k, a.v, attn_shape(l));
  };
  if (gated_attention()) {
    output_gate_backward(a);
    attend_back(static_cast<const T*>(a.attn_o));
  } else {
    with_pointer(a.attn_out, attend_back);
  }
  charge_time_to(OpProfile::kAttention);
  if (cfg_.uses_rope(l)) {
    const int64_t n_rot = cfg_.n_rot();
    rope_backward(d_q_, rope_cos(l), rope_sin(l), batch_, seq_len_, cfg_.n_heads, hd, rope_halves(), n_rot);
    rope_backward(d_k_, rope_cos(l), rope_sin(l), batch_, seq_len_, cfg_.n_kv_heads, hd, rope_halves(), n_rot);
    charge_time_to(OpProfile::kRope);
  }
  T *d_q_proj = d_q_, *d_k_proj = d_k_;  // the gradients of the projections' outputs
  if (qk_norm()) {
    std::fill(d_q_raw_, d_q_raw_ + BT * QD, T(0));
    std::fill(d_k_raw_, d_k_raw_ + BT * KD, T(0));
    const int64_t qn = cfg_.q_norm_dim(), kn = cfg_.k_norm_dim();
    rmsnorm_backward(d_q_raw_, g.attn_q_norm, d_q_, a.q_raw, w.attn_q_norm, a.rstd_q, BT * QD / qn, qn);
    rmsnorm_backward(d_k_raw_, g.attn_k_norm, d_k_, a.k_raw, w.attn_k_norm, a.rstd_k, BT * KD / kn, kn);
    d_q_proj = d_q_raw_;
    d_k_proj = d_k_raw_;
    charge_time_to(OpProfile::kNorm);
  }
  if (g.bq) bias_backward(g.bq, d_q_proj, BT, QD);  // null: no bias, or frozen
  if (g.bk) bias_backward(g.bk, d_k_proj, BT, KD);
  if (g.bv) bias_backward(g.bv, d_v_, BT, KD);
  if (gated_attention()) {  // attn_q's output was [query | gate] per head
    join_query_gate_grad(d_q_proj);
    d_q_proj = d_q_full_;
  }
  const GemmIn<T> dq = gemm_in(d_q_proj, d_q_h_, BT * cfg_.q_proj_dim()), dk = gemm_in(d_k_proj, d_k_h_, BT * KD),
                  dv = gemm_in(d_v_, d_v_h_, BT * KD);
  project_bwd(l, kAttnQ, d_normed_, dq, a.h_attn, false, OpProfile::kQkv);
  project_bwd(l, kAttnK, d_normed_, dk, a.h_attn, true, OpProfile::kQkv);
  project_bwd(l, kAttnV, d_normed_, dv, a.h_attn, true, OpProfile::kQkv);
}

template void Transformer<float>::plan_attention_acts(BumpPlan<float>&, LayerActs<float>&);
template void Transformer<float>::attn_block_forward(int64_t, float*);
template void Transformer<float>::output_gate_backward(const LayerActs<float>&);
template void Transformer<float>::join_query_gate_grad(const float*);
template void Transformer<float>::attn_block_backward(int64_t, float*);
template void Transformer<double>::plan_attention_acts(BumpPlan<double>&, LayerActs<double>&);
template void Transformer<double>::attn_block_forward(int64_t, double*);
template void Transformer<double>::output_gate_backward(const LayerActs<double>&);
template void Transformer<double>::join_query_gate_grad(const double*);
template void Transformer<double>::attn_block_backward(int64_t, double*);

}  // namespace ggtrain::model
