// LFM2's short-convolution sublayer (Sublayer::kShortConv) of the training
// passes: its activations, forward and backward (the convolution itself is
// kernels/short_conv.h).
#include "kernels/short_conv.h"
#include "model/transformer.h"

namespace ggtrain::model {

using namespace ggtrain::kernels;

// The activations a short-convolution layer keeps, and the gradients all
// such layers share.
template <typename T>
void Transformer<T>::plan_conv_acts(BumpPlan<T>& p, LayerActs<T>& a) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  a.bcx = p.take(BT * 3 * C);
  a.conv_u = p.take(BT * C);
  a.conv_v = p.take(BT * C);
  a.conv_y = take_gemm_in(p, BT * C);
}

template <typename T>
void Transformer<T>::plan_conv_grads(BumpPlan<T>& p) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  d_bcx_ = p.take(BT * 3 * C);
  d_conv_v_ = p.take(BT * C);
  d_conv_y_ = p.take(BT * C);
  if (bf16_) d_bcx_h_ = take_gemm_in(p, BT * 3 * C).bf16;
}

// out = out_proj(c * conv(b * x)), (b | c | x) = in_proj(h) of the normed
// input h (kernels/short_conv.h); with out null it stops before out_proj.
template <typename T>
void Transformer<T>::conv_block_forward(int64_t l, T* out) {
  const auto& w = w_.layers[size_t(l)];
  auto& a = layer_acts_[size_t(l)];
  project(l, kConvInProj, a.bcx, a.h_attn, OpProfile::kQkv);
  with_pointer(a.conv_y,
               [&](auto* y) { short_conv_forward(y, a.conv_v, a.conv_u, a.bcx, w.conv_kernel, conv_shape()); });
  charge_time_to(OpProfile::kShortConv);
  if (!out) return;
  project(l, kConvOutProj, out, a.conv_y, OpProfile::kAttnOutput);
}

template <typename T>
void Transformer<T>::conv_block_backward(int64_t l, T* d_out) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  const auto& w = w_.layers[size_t(l)];
  const auto& g = g_.layers[size_t(l)];
  const auto& a = layer_acts_[size_t(l)];
  project_bwd(l, kConvOutProj, d_conv_y_, gemm_in(d_out, d_res_h_, BT * C), a.conv_y, false, OpProfile::kAttnOutput);
  short_conv_backward(d_bcx_, g.conv_kernel, d_conv_v_, d_conv_y_, a.bcx, a.conv_v, a.conv_u, w.conv_kernel,
                      conv_shape());
  charge_time_to(OpProfile::kShortConv);
  project_bwd(l, kConvInProj, d_normed_, gemm_in(d_bcx_, d_bcx_h_, BT * 3 * C), a.h_attn, false, OpProfile::kQkv);
}

template void Transformer<float>::plan_conv_acts(BumpPlan<float>&, LayerActs<float>&);
template void Transformer<float>::plan_conv_grads(BumpPlan<float>&);
template void Transformer<float>::conv_block_forward(int64_t, float*);
template void Transformer<float>::conv_block_backward(int64_t, float*);
template void Transformer<double>::plan_conv_acts(BumpPlan<double>&, LayerActs<double>&);
template void Transformer<double>::plan_conv_grads(BumpPlan<double>&);
template void Transformer<double>::conv_block_forward(int64_t, double*);
template void Transformer<double>::conv_block_backward(int64_t, double*);

}  // namespace ggtrain::model
