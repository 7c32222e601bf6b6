// The feed-forward half of a mixture-of-experts layer, as llama.cpp's
// build_moe_ffn computes it: the router picks each token's k experts
// (kernels/expert_routing.h), the (token, slot) pairs are grouped by expert
// so that each expert runs one GEMM over all of its tokens, and each token
// sums its experts' outputs weighted by the router.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "model/family_ops.h"
#include "model/transformer.h"

namespace ggtrain::model {

using namespace ggtrain::kernels;

// The activations an experts layer keeps, and the buffers all such layers
// share: the grouped inputs and the routing's gradients (their gate/up/act
// gradients are the dense feed-forward's, sized for k experts in plan()).
template <typename T>
void Transformer<T>::plan_expert_acts(BumpPlan<T>& p, LayerActs<T>& a) {
  const kernels::RoutingShape s = routing_shape();
  const int64_t pairs = s.pairs(), F = cfg_.expert_ff();
  a.moe_probs = p.take(s.rows * s.n_experts);
  a.moe_weights = p.take(pairs);
  a.moe_chosen = take_ints(p, pairs);
  a.moe_groups = {take_ints(p, s.n_experts + 1), take_ints(p, pairs)};
  a.moe_gate = p.take(pairs * F);
  a.moe_up = p.take(pairs * F);
  a.moe_act = take_gemm_in(p, pairs * F);
  a.moe_y = p.take(pairs * cfg_.d_model);
  if (!cfg_.has_shared_expert()) return;
  const int64_t FS = cfg_.shared_ff();
  a.shared_gate = p.take(s.rows * FS);
  a.shared_up = p.take(s.rows * FS);
  a.shared_act = take_gemm_in(p, s.rows * FS);
  a.shared_y = p.take(s.rows * cfg_.d_model);
  a.shared_logit = p.take(s.rows);
}

template <typename T>
void Transformer<T>::plan_expert_grads(BumpPlan<T>& p) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  const kernels::RoutingShape s = routing_shape();
  moe_x_ = take_gemm_in(p, s.pairs() * C);
  d_moe_rows_ = p.take(s.pairs() * C);
  if (bf16_) d_moe_rows_h_ = take_gemm_in(p, std::max(s.pairs() * C, BT * s.n_experts)).bf16;  // d(rows), d(logits)
  d_moe_weights_ = p.take(s.pairs());
  d_moe_logits_ = p.take(BT * s.n_experts);
  if (cfg_.has_shared_expert()) {
    d_shared_y_ = p.take(BT * C);
    d_shared_logit_ = p.take(BT);
  }
}

template <typename T>
void Transformer<T>::gather_expert_inputs(const LayerActs<T>& a) {
  const RoutingShape s = routing_shape();
  const int64_t C = cfg_.d_model, k = s.n_used;
  auto gather = [&](auto* dst, const auto* src) {
#pragma omp parallel for schedule(static) if (s.pairs() * C >= kMinParallelWork)
    for (int64_t i = 0; i < s.pairs(); ++i)
      std::copy(src + (i / k) * C, src + (i / k + 1) * C, dst + int64_t(a.moe_groups.row_of[i]) * C);
  };
  if (moe_x_.bf16) gather(moe_x_.bf16, a.h_ffn.bf16);
  else gather(moe_x_.fp32, a.h_ffn.fp32);
}

template <typename T>
void Transformer<T>::expert_project(int64_t l, int64_t e, ExpertMatrix m, int64_t first, int64_t n, T* out,
                                    const GemmIn<T>& in) {
  nn::Linear<T>& p = expert(l, e, m);
  p.forward_base(out, in, n);
  if (!p.has_lora()) return;
  p.set_lora_rows(layer_acts_[size_t(l)].expert_lora_u[size_t(m)] + first * cfg_.lora.rank);
  p.forward_lora(out, in, n);
}

template <typename T>
void Transformer<T>::expert_project_bwd(int64_t l, int64_t e, ExpertMatrix m, int64_t n, T* din, const GemmIn<T>& dout,
                                        const GemmIn<T>& in, bool accumulate) {
  const nn::Linear<T>& p = expert(l, e, m);
  p.backward_base(din, dout, in, n, accumulate);
  if (p.has_lora()) p.backward_lora(din, dout, in, n);  // its rows: set by the forward
}

template <typename T>
void Transformer<T>::experts_forward(int64_t l, T* out) {
  const RoutingShape s = routing_shape();
  const int64_t C = cfg_.d_model, F = cfg_.expert_ff(), k = s.n_used, E = s.n_experts;
  auto& a = layer_acts_[size_t(l)];
  project(l, kFfnGateInp, a.moe_probs, a.h_ffn, OpProfile::kGateUp);  // the logits, softmaxed in place
  route_forward(a.moe_probs, a.moe_chosen, a.moe_weights, s);
  group_by_expert(a.moe_groups, a.moe_chosen, s);
  if (phase_ == OpProfile::kForward) {  // the load-balancing loss counts each forward once
    for (int64_t i = 0; i < s.pairs(); ++i) expert_picks_[size_t(a.moe_chosen[i])] += 1;
    for (int64_t t = 0; t < s.rows; ++t)
      for (int64_t e = 0; e < E; ++e) expert_prob_sums_[size_t(e)] += double(a.moe_probs[t * E + e]);
  }
  gather_expert_inputs(a);
  charge_time_to(OpProfile::kGateUp);
  const int32_t* off = a.moe_groups.offsets;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = off[e + 1] - off[e];
    if (n == 0) continue;
    expert_project(l, e, kExpGate, off[e], n, a.moe_gate + off[e] * F, moe_x_.at(off[e] * C));
    expert_project(l, e, kExpUp, off[e], n, a.moe_up + off[e] * F, moe_x_.at(off[e] * C));
  }
  charge_time_to(OpProfile::kGateUp);
  with_pointer(a.moe_act,
               [&](auto* act) { ffn_gate_forward(ffn_activation(), act, a.moe_gate, a.moe_up, s.pairs() * F); });
  charge_time_to(OpProfile::kSwiglu);
  // Backward needs each expert's output before its weight, so the down
  // projections run even when recomputation stops before the sum.
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = off[e + 1] - off[e];
    if (n > 0) expert_project(l, e, kExpDown, off[e], n, a.moe_y + off[e] * C, a.moe_act.at(off[e] * F));
  }
  charge_time_to(OpProfile::kDown);
  const bool shared = cfg_.has_shared_expert();
  if (shared) shared_expert_forward(l);
  if (!out) return;
#pragma omp parallel for schedule(static) if (s.rows * C >= kMinParallelWork)
  for (int64_t t = 0; t < s.rows; ++t) {
    // the experts' sum in slot order, then the gated shared expert, as
    // llama.cpp adds them (the residual follows, half_forward)
    const T* w = a.moe_weights + t * k;
    const int32_t* row = a.moe_groups.row_of + t * k;
    const T gate = shared ? T(1) / (T(1) + std::exp(-a.shared_logit[t])) : T(0);
    for (int64_t c = 0; c < C; ++c) {
      T sum = T(0);
      for (int64_t j = 0; j < k; ++j) sum += w[j] * a.moe_y[int64_t(row[j]) * C + c];
      if (shared) sum += a.shared_y[t * C + c] * gate;
      out[t * C + c] = sum;
    }
  }
  charge_time_to(OpProfile::kDown);
}

// y = down(silu(gate h) * up h) and the logit of its gate, g . h: the
// output is sigmoid(logit) y (the sum in experts_forward).
template <typename T>
void Transformer<T>::shared_expert_forward(int64_t l) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model, FS = cfg_.shared_ff();
  auto& a = layer_acts_[size_t(l)];
  project(l, kFfnGateShexp, a.shared_gate, a.h_ffn, OpProfile::kGateUp);
  project(l, kFfnUpShexp, a.shared_up, a.h_ffn, OpProfile::kGateUp);
  with_pointer(a.shared_act,
               [&](auto* act) { ffn_gate_forward(ffn_activation(), act, a.shared_gate, a.shared_up, BT * FS); });
  charge_time_to(OpProfile::kSwiglu);
  project(l, kFfnDownShexp, a.shared_y, a.shared_act, OpProfile::kDown);
  const T* g = w_.layers[size_t(l)].shared_expert_gate;
  with_pointer(a.h_ffn, [&](const auto* h) {
#pragma omp parallel for schedule(static) if (BT * C >= kMinParallelWork)
    for (int64_t t = 0; t < BT; ++t) {
      T dot = T(0);
      for (int64_t c = 0; c < C; ++c) dot += T(load(h + t * C + c)) * g[c];
      a.shared_logit[t] = dot;
    }
  });
  charge_time_to(OpProfile::kGateUp);
}

// d_res: dL/d(the feed-forward output). Adds dL/d(h_ffn) of both the gated expert and its
// gate's logit to d_normed_.
template <typename T>
void Transformer<T>::shared_expert_backward(int64_t l, const T* d_res) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model, FS = cfg_.shared_ff();
  const auto& a = layer_acts_[size_t(l)];
  const T* g = w_.layers[size_t(l)].shared_expert_gate;
#pragma omp parallel for schedule(static) if (BT * C >= kMinParallelWork)
  for (int64_t t = 0; t < BT; ++t) {
    const T s = T(1) / (T(1) + std::exp(-a.shared_logit[t]));
    T dot = T(0);
    for (int64_t c = 0; c < C; ++c) {
      dot += d_res[t * C + c] * a.shared_y[t * C + c];
      d_shared_y_[t * C + c] = s * d_res[t * C + c];
    }
    d_shared_logit_[t] = dot * s * (T(1) - s);
    for (int64_t c = 0; c < C; ++c) d_normed_[t * C + c] += d_shared_logit_[t] * g[c];
  }
  if (T* dg = g_.layers[size_t(l)].shared_expert_gate) {  // trainable: sum over tokens, in order
    with_pointer(a.h_ffn, [&](const auto* h) {
#pragma omp parallel for schedule(static) if (BT * C >= kMinParallelWork)
      for (int64_t c = 0; c < C; ++c) {
        T sum = T(0);
        for (int64_t t = 0; t < BT; ++t) sum += d_shared_logit_[t] * T(load(h + t * C + c));
        dg[c] += sum;
      }
    });
  }
  charge_time_to(OpProfile::kGateUp);
  project_bwd(l, kFfnDownShexp, d_act_, gemm_in(d_shared_y_, d_res_h_, BT * C), a.shared_act, false, OpProfile::kDown);
  gate_backward(a.shared_gate, a.shared_up, BT * FS);
  charge_time_to(OpProfile::kSwiglu);
  project_bwd(l, kFfnGateShexp, d_normed_, d_gate_, a.h_ffn, true, OpProfile::kGateUp);
  project_bwd(l, kFfnUpShexp, d_normed_, d_up_, a.h_ffn, true, OpProfile::kGateUp);
}

template <typename T>
void Transformer<T>::experts_backward(int64_t l, const T* d_out) {
  const RoutingShape s = routing_shape();
  const int64_t C = cfg_.d_model, F = cfg_.expert_ff(), k = s.n_used, E = s.n_experts;
  const auto& a = layer_acts_[size_t(l)];
  const int32_t* off = a.moe_groups.offsets;
  // Each pair's weight and its expert's output: d(weight) = d(x_out) . y,
  // d(y) = weight d(x_out), in grouped rows.
#pragma omp parallel for schedule(static) if (s.pairs() * C >= kMinParallelWork)
  for (int64_t i = 0; i < s.pairs(); ++i) {
    const int64_t r = a.moe_groups.row_of[i];
    const T *dx = d_out + (i / k) * C, *y = a.moe_y + r * C;
    T* dy = d_moe_rows_ + r * C;
    T dot = T(0);
    for (int64_t c = 0; c < C; ++c) {
      dot += dx[c] * y[c];
      dy[c] = a.moe_weights[i] * dx[c];
    }
    d_moe_weights_[i] = dot;
  }
  const GemmIn<T> dy = gemm_in(d_moe_rows_, d_moe_rows_h_, s.pairs() * C);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = off[e + 1] - off[e];
    if (n > 0)
      expert_project_bwd(l, e, kExpDown, n, d_act_ + off[e] * F, dy.at(off[e] * C), a.moe_act.at(off[e] * F), false);
  }
  charge_time_to(OpProfile::kDown);
  gate_backward(a.moe_gate, a.moe_up, s.pairs() * F);
  charge_time_to(OpProfile::kSwiglu);
  gather_expert_inputs(a);  // d_moe_rows_ is free again: it takes d(expert input)
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = off[e + 1] - off[e];
    if (n == 0) continue;
    T* dx = d_moe_rows_ + off[e] * C;
    expert_project_bwd(l, e, kExpGate, n, dx, d_gate_.at(off[e] * F), moe_x_.at(off[e] * C), false);
    expert_project_bwd(l, e, kExpUp, n, dx, d_up_.at(off[e] * F), moe_x_.at(off[e] * C), true);
  }
  charge_time_to(OpProfile::kGateUp);
#pragma omp parallel for schedule(static) if (s.rows * C >= kMinParallelWork)
  for (int64_t t = 0; t < s.rows; ++t) {  // each token's slots in order: the same sum for any thread count
    T* dh = d_normed_ + t * C;
    std::fill(dh, dh + C, T(0));
    for (int64_t j = 0; j < k; ++j) {
      const T* dx = d_moe_rows_ + int64_t(a.moe_groups.row_of[t * k + j]) * C;
      for (int64_t c = 0; c < C; ++c) dh[c] += dx[c];
    }
  }
  // The router: the weights' gradient, and the load-balancing loss's,
  // d(coef aux)/d(p_e) = coef E picks_e / N^2 over the N tokens of all layers.
  const bool balancing = opts_.router_aux_loss_coef != 0 && loss_scale_ != T(0);
  if (balancing) {
    const double n_all = double(s.rows) * double(cfg_.n_layers);
    for (int64_t e = 0; e < E; ++e)
      d_balance_[size_t(e)] =
          T(double(loss_scale_) * opts_.router_aux_loss_coef * double(E) * expert_picks_[size_t(e)] / (n_all * n_all));
  }
  route_backward(d_moe_logits_, d_moe_weights_, a.moe_probs, a.moe_chosen, balancing ? d_balance_.data() : nullptr, s);
  charge_time_to(OpProfile::kGateUp);
  const GemmIn<T> d_logits = gemm_in(d_moe_logits_, d_moe_rows_h_, s.rows * E);
  project_bwd(l, kFfnGateInp, d_normed_, d_logits, a.h_ffn, true, OpProfile::kGateUp);
  if (cfg_.has_shared_expert()) shared_expert_backward(l, d_out);
}

template void Transformer<float>::plan_expert_acts(BumpPlan<float>&, LayerActs<float>&);
template void Transformer<float>::plan_expert_grads(BumpPlan<float>&);
template void Transformer<float>::gather_expert_inputs(const LayerActs<float>&);
template void Transformer<float>::shared_expert_forward(int64_t);
template void Transformer<float>::shared_expert_backward(int64_t, const float*);
template void Transformer<float>::expert_project(int64_t, int64_t, ExpertMatrix, int64_t, int64_t, float*,
                                                 const GemmIn<float>&);
template void Transformer<float>::expert_project_bwd(int64_t, int64_t, ExpertMatrix, int64_t, float*,
                                                     const GemmIn<float>&, const GemmIn<float>&, bool);
template void Transformer<float>::experts_forward(int64_t, float*);
template void Transformer<float>::experts_backward(int64_t, const float*);
template void Transformer<double>::plan_expert_acts(BumpPlan<double>&, LayerActs<double>&);
template void Transformer<double>::plan_expert_grads(BumpPlan<double>&);
template void Transformer<double>::gather_expert_inputs(const LayerActs<double>&);
template void Transformer<double>::shared_expert_forward(int64_t);
template void Transformer<double>::shared_expert_backward(int64_t, const double*);
template void Transformer<double>::expert_project(int64_t, int64_t, ExpertMatrix, int64_t, int64_t, double*,
                                                  const GemmIn<double>&);
template void Transformer<double>::expert_project_bwd(int64_t, int64_t, ExpertMatrix, int64_t, double*,
                                                      const GemmIn<double>&, const GemmIn<double>&, bool);
template void Transformer<double>::experts_forward(int64_t, double*);
template void Transformer<double>::experts_backward(int64_t, const double*);

}  // namespace ggtrain::model
