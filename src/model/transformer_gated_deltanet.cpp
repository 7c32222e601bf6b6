// Qwen3.5's Gated DeltaNet sublayer (Sublayer::kGatedDeltaNet) of the
// training passes: its activations, forward and backward (the convolution,
// gates, delta rule and gated norm are kernels/gated_deltanet.h).
#include "kernels/gated_deltanet.h"
#include "model/transformer.h"

namespace ggtrain::model {

using namespace ggtrain::kernels;

// The activations a Gated DeltaNet layer keeps, and the buffers all such
// layers share: the gradients, and the rule's scratch both passes use.
template <typename T>
void Transformer<T>::plan_gdn_acts(BumpPlan<T>& p, LayerActs<T>& a) {
  const kernels::GdnShape s = gdn_shape();
  const int64_t BT = s.rows(), CD = s.conv_dim(), VD = s.value_dim(), H = s.n_v_heads, HK = s.n_k_heads;
  a.gdn_u = p.take(BT * CD);
  a.gdn_z = p.take(BT * VD);
  a.gdn_b = p.take(BT * H);
  a.gdn_alpha = p.take(BT * H);
  a.gdn = {p.take(BT * CD), p.take(BT * HK), p.take(BT * HK), p.take(BT * H),
           p.take(BT * H),  p.take(BT * VD), p.take(BT * H),  p.take(s.rule().checkpoint_floats())};
  a.gdn_y = take_gemm_in(p, BT * VD);
}

template <typename T>
void Transformer<T>::plan_gdn_grads(BumpPlan<T>& p) {
  const int64_t BT = batch_ * seq_len_;
  const kernels::GdnShape s = gdn_shape();
  d_gdn_y_ = p.take(BT * s.value_dim());
  d_gdn_z_ = p.take(BT * s.value_dim());
  d_gdn_u_ = p.take(BT * s.conv_dim());
  d_gdn_b_ = p.take(BT * s.n_v_heads);
  d_gdn_alpha_ = p.take(BT * s.n_v_heads);
  if (bf16_) d_gdn_h_ = take_gemm_in(p, BT * s.conv_dim()).bf16;
  gdn_scratch_ = p.take(kernels::gdn_scratch_floats(s));
}

// out = ssm_out(gated_deltanet(attn_qkv h, attn_gate h, ssm_beta h,
// ssm_alpha h)) of the normed input h (kernels/gated_deltanet.h); with out
// null it stops before ssm_out.
template <typename T>
void Transformer<T>::gdn_block_forward(int64_t l, T* out) {
  const auto& w = w_.layers[size_t(l)];
  auto& a = layer_acts_[size_t(l)];
  project(l, kGdnQkv, a.gdn_u, a.h_attn, OpProfile::kQkv);
  project(l, kGdnGate, a.gdn_z, a.h_attn, OpProfile::kQkv);
  project(l, kSsmBeta, a.gdn_b, a.h_attn, OpProfile::kQkv);
  project(l, kSsmAlpha, a.gdn_alpha, a.h_attn, OpProfile::kQkv);
  with_pointer(a.gdn_y, [&](auto* y) {
    gdn_forward(y, a.gdn, kernels::gdn_scratch(gdn_scratch_, gdn_shape()), a.gdn_u, a.gdn_z, a.gdn_b, a.gdn_alpha,
                w.ssm_conv, w.ssm_dt, w.ssm_a, w.ssm_norm, gdn_shape());
  });
  charge_time_to(OpProfile::kGatedDeltaNet);
  if (!out) return;
  project(l, kSsmOut, out, a.gdn_y, OpProfile::kAttnOutput);
}

template <typename T>
void Transformer<T>::gdn_block_backward(int64_t l, T* d_out) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  const kernels::GdnShape s = gdn_shape();
  const auto& w = w_.layers[size_t(l)];
  const auto& g = g_.layers[size_t(l)];
  const auto& a = layer_acts_[size_t(l)];
  project_bwd(l, kSsmOut, d_gdn_y_, gemm_in(d_out, d_res_h_, BT * C), a.gdn_y, false, OpProfile::kAttnOutput);
  gdn_backward(d_gdn_u_, d_gdn_z_, d_gdn_b_, d_gdn_alpha_, g.ssm_conv, g.ssm_dt, g.ssm_a, g.ssm_norm, d_gdn_y_, a.gdn,
               kernels::gdn_scratch(gdn_scratch_, s), a.gdn_u, a.gdn_z, a.gdn_alpha, w.ssm_conv, w.ssm_dt, w.ssm_a,
               w.ssm_norm, s);
  charge_time_to(OpProfile::kGatedDeltaNet);
  const struct {
    BlockMatrix m;
    T* d;
    int64_t width;
  } inputs[] = {{kGdnQkv, d_gdn_u_, s.conv_dim()},
                {kGdnGate, d_gdn_z_, s.value_dim()},
                {kSsmBeta, d_gdn_b_, s.n_v_heads},
                {kSsmAlpha, d_gdn_alpha_, s.n_v_heads}};
  bool first = true;
  for (const auto& in : inputs) {  // one bf16 buffer: each GEMM reads its rounding before the next is made
    project_bwd(l, in.m, d_normed_, gemm_in(in.d, d_gdn_h_, BT * in.width), a.h_attn, !first, OpProfile::kQkv);
    first = false;
  }
}

template void Transformer<float>::plan_gdn_acts(BumpPlan<float>&, LayerActs<float>&);
template void Transformer<float>::plan_gdn_grads(BumpPlan<float>&);
template void Transformer<float>::gdn_block_forward(int64_t, float*);
template void Transformer<float>::gdn_block_backward(int64_t, float*);
template void Transformer<double>::plan_gdn_acts(BumpPlan<double>&, LayerActs<double>&);
template void Transformer<double>::plan_gdn_grads(BumpPlan<double>&);
template void Transformer<double>::gdn_block_forward(int64_t, double*);
template void Transformer<double>::gdn_block_backward(int64_t, double*);

}  // namespace ggtrain::model
