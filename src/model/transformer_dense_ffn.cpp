// The dense gated feed-forward sublayer (Sublayer::kDenseFfn) of the
// training passes: its activations, forward and backward (SwiGLU, or GeGLU
// in the families that have it).
#include "kernels/elementwise.h"
#include "model/family_ops.h"
#include "model/transformer.h"

namespace ggtrain::model {

using namespace ggtrain::kernels;

// The activations a dense feed-forward keeps for its backward.
template <typename T>
void Transformer<T>::plan_dense_ffn_acts(BumpPlan<T>& p, LayerActs<T>& a) {
  const int64_t BT = batch_ * seq_len_, F = cfg_.d_ff;
  a.gate = p.take(BT * F);
  a.up = p.take(BT * F);
  a.act = take_gemm_in(p, BT * F);
}

// out = W_down (silu(W_gate h) * W_up h) of the normed input h (h_ffn);
// GELU for silu in the families that have it. With out null
// (recomputation for backward) it stops after the activation.
template <typename T>
void Transformer<T>::dense_ffn_forward(int64_t l, T* out) {
  const int64_t BT = batch_ * seq_len_, F = cfg_.d_ff;
  auto& a = layer_acts_[size_t(l)];
  project(l, kFfnGate, a.gate, a.h_ffn, OpProfile::kGateUp);
  project(l, kFfnUp, a.up, a.h_ffn, OpProfile::kGateUp);
  with_pointer(a.act, [&](auto* act) { ffn_gate_forward(ffn_activation(), act, a.gate, a.up, BT * F); });
  charge_time_to(OpProfile::kSwiglu);
  if (!out) return;
  project(l, kFfnDown, out, a.act, OpProfile::kDown);
}

template <typename T>
void Transformer<T>::gate_backward(const T* gate, const T* up, int64_t n) {
  if (d_gate_.bf16)  // bf16: d_gate and d_up only feed GEMMs
    return ffn_gate_backward(ffn_activation(), d_gate_.bf16, d_up_.bf16, d_act_, gate, up, n);
  ffn_gate_backward(ffn_activation(), d_gate_.fp32, d_up_.fp32, d_act_, gate, up, n);
}

template <typename T>
void Transformer<T>::dense_ffn_backward(int64_t l, T* d_out) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model, F = cfg_.d_ff;
  const auto& a = layer_acts_[size_t(l)];
  project_bwd(l, kFfnDown, d_act_, gemm_in(d_out, d_res_h_, BT * C), a.act, false, OpProfile::kDown);
  gate_backward(a.gate, a.up, BT * F);
  charge_time_to(OpProfile::kSwiglu);
  project_bwd(l, kFfnGate, d_normed_, d_gate_, a.h_ffn, false, OpProfile::kGateUp);
  project_bwd(l, kFfnUp, d_normed_, d_up_, a.h_ffn, true, OpProfile::kGateUp);
}

template void Transformer<float>::plan_dense_ffn_acts(BumpPlan<float>&, LayerActs<float>&);
template void Transformer<float>::dense_ffn_forward(int64_t, float*);
template void Transformer<float>::gate_backward(const float*, const float*, int64_t);
template void Transformer<float>::dense_ffn_backward(int64_t, float*);
template void Transformer<double>::plan_dense_ffn_acts(BumpPlan<double>&, LayerActs<double>&);
template void Transformer<double>::dense_ffn_forward(int64_t, double*);
template void Transformer<double>::gate_backward(const double*, const double*, int64_t);
template void Transformer<double>::dense_ffn_backward(int64_t, double*);

}  // namespace ggtrain::model
