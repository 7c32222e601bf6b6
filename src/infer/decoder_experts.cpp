// The decoder's mixture of experts (Sublayer::kExperts).
#include "infer/decoder.h"

#include <algorithm>

#include "kernels/elementwise.h"
#include "kernels/expert_routing.h"
#include "model/family_ops.h"

namespace ggtrain::infer {

void Decoder::experts(int64_t l, int64_t n) {
  const int64_t C = cfg_.d_model;
  for (int64_t t = 0; t < n; t += kExpertChunk)
    experts_chunk(l, h_.data() + t * C, tmp_.data() + t * C, std::min(kExpertChunk, n - t));
}

// As the training forward (model/transformer_experts.cpp): route, group the
// (token, slot) pairs by expert, one product per expert over its rows, then
// each token's weighted sum in slot order.
void Decoder::experts_chunk(int64_t l, const float* h, float* out, int64_t n) {
  const Layer& L = layers_[size_t(l)];
  const int64_t C = cfg_.d_model, F = cfg_.expert_ff(), k = cfg_.n_experts_used;
  const kernels::RoutingShape s{n, cfg_.n_experts, k, cfg_.architecture().renormalize_expert_weights};
  project(L.router, const_cast<float*>(h), moe_probs_.data(), n);
  kernels::route_forward(moe_probs_.data(), moe_chosen_.data(), moe_weights_.data(), s);
  const kernels::ExpertGroups g{moe_offsets_.data(), moe_row_of_.data()};
  kernels::group_by_expert(g, moe_chosen_.data(), s);
  for (int64_t i = 0; i < s.pairs(); ++i) std::copy_n(h + (i / k) * C, C, moe_x_.data() + int64_t(g.row_of[i]) * C);
  for (int64_t e = 0; e < cfg_.n_experts; ++e) {
    const int64_t first = g.offsets[e], rows = g.offsets[e + 1] - first;
    if (rows == 0) continue;  // its weights are not read
    float* x = moe_x_.data() + first * C;
    float *gate = moe_gate_.data() + first * F, *up = moe_up_.data() + first * F;
    project(L.experts[model::kExpGate][size_t(e)], x, gate, rows);
    project(L.experts[model::kExpUp][size_t(e)], x, up, rows);
    model::ffn_gate_forward(cfg_.architecture().ffn_activation, gate, gate, up, rows * F);
    project(L.experts[model::kExpDown][size_t(e)], gate, moe_y_.data() + first * C, rows);
  }
  const bool shared = cfg_.has_shared_expert();
  if (shared) {  // every token's shared expert
    const int64_t FS = cfg_.shared_ff();
    project(L.shared_gate, const_cast<float*>(h), shared_gate_.data(), n);
    project(L.shared_up, const_cast<float*>(h), shared_up_.data(), n);
    model::ffn_gate_forward(cfg_.architecture().ffn_activation, shared_gate_.data(), shared_gate_.data(),
                            shared_up_.data(), n * FS);
    project(L.shared_down, shared_gate_.data(), shared_y_.data(), n);
  }
  if (shared && observer_) observe(&L.shared_expert_gate, h, n, C);  // llama.cpp's [C] x 1 product
  for (int64_t t = 0; t < n; ++t) {
    const float* w = moe_weights_.data() + t * k;
    const int32_t* row = g.row_of + t * k;
    float gate = 0.0f;  // sigmoid(g . h), the shared expert's share
    if (shared) {
      float dot = 0.0f;
      for (int64_t c = 0; c < C; ++c) dot += h[t * C + c] * L.shared_expert_gate[size_t(c)];
      gate = 1.0f / (1.0f + std::exp(-dot));
    }
    for (int64_t c = 0; c < C; ++c) {
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) sum += w[j] * moe_y_[size_t(int64_t(row[j]) * C + c)];
      if (shared) sum += shared_y_[size_t(t * C + c)] * gate;
      out[t * C + c] = sum;
    }
  }
}

}  // namespace ggtrain::infer
