#pragma once
// The router of a mixture-of-experts layer, as llama.cpp's build_moe_ffn
// computes it with softmax gating:
//   p = softmax(logits)                    over the experts, per token
//   chosen = the k largest p               (ties: the lower expert first)
//   w = p[chosen]                          the chosen experts' weights
//   w /= max(sum(w), 2^-14)                where the family renormalises
// and its backward, plus the grouping of (token, slot) pairs by expert that
// lets each expert run one GEMM over all its tokens. Nothing is dropped:
// every token runs its k experts, whatever their load.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "kernels/parallel.h"

namespace ggtrain::kernels {

struct RoutingShape {
  int64_t rows = 0;  // tokens
  int64_t n_experts = 0;
  int64_t n_used = 0;  // k: experts per token
  bool renormalize = false;
  int64_t pairs() const { return rows * n_used; }
};

// The most experts a layer may have (the routing keeps per-token scratch of
// this size on the stack).
inline constexpr int64_t kMaxExperts = 1024;

// llama.cpp clamps the chosen weights' sum to the smallest normal f16
// before dividing by it.
inline constexpr double kMinExpertWeightSum = 6.103515625e-5;

// probs [rows, E] holds the router's logits and becomes their softmax;
// chosen [rows, k] the experts by falling probability; weights [rows, k].
template <typename T>
void route_forward(T* probs, int32_t* chosen, T* weights, const RoutingShape& s) {
  const int64_t E = s.n_experts, k = s.n_used;
#pragma omp parallel for schedule(static) if (s.rows * E >= kMinParallelWork)
  for (int64_t t = 0; t < s.rows; ++t) {
    T* p = probs + t * E;
    const T max = *std::max_element(p, p + E);
    T sum = T(0);
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(p[e] - max);
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    int32_t* c = chosen + t * k;
    int32_t order[kMaxExperts];
    std::iota(order, order + E, 0);
    std::partial_sort(order, order + k, order + E,
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    T total = T(0);
    for (int64_t i = 0; i < k; ++i) total += p[c[i] = order[i]];
    const T norm = s.renormalize ? std::max(total, T(kMinExpertWeightSum)) : T(1);
    for (int64_t i = 0; i < k; ++i) weights[t * k + i] = p[c[i]] / norm;
  }
}

// d_logits [rows, E] from d_weights [rows, k] (and, where not null,
// d_probs_all [E] added to every token's d(probs): the load-balancing
// loss's gradient).
template <typename T>
void route_backward(T* d_logits, const T* d_weights, const T* probs, const int32_t* chosen, const T* d_probs_all,
                    const RoutingShape& s) {
  const int64_t E = s.n_experts, k = s.n_used;
#pragma omp parallel for schedule(static) if (s.rows * E >= kMinParallelWork)
  for (int64_t t = 0; t < s.rows; ++t) {
    const T* p = probs + t * E;
    const int32_t* c = chosen + t * k;
    const T* dw = d_weights + t * k;
    T* dp = d_logits + t * E;  // d(probs) first, then d(logits) in place
    for (int64_t e = 0; e < E; ++e) dp[e] = d_probs_all ? d_probs_all[e] : T(0);
    T total = T(0), dot = T(0);
    for (int64_t i = 0; i < k; ++i) {
      total += p[c[i]];
      dot += dw[i] * p[c[i]];
    }
    const bool divided = s.renormalize, clamped = total < T(kMinExpertWeightSum);
    const T norm = divided ? std::max(total, T(kMinExpertWeightSum)) : T(1);
    for (int64_t i = 0; i < k; ++i) {
      // w_i = p_i / S with S the chosen sum (a constant where it is clamped)
      dp[c[i]] += dw[i] / norm - (divided && !clamped ? dot / (norm * norm) : T(0));
    }
    T pdp = T(0);
    for (int64_t e = 0; e < E; ++e) pdp += p[e] * dp[e];
    for (int64_t e = 0; e < E; ++e) dp[e] = p[e] * (dp[e] - pdp);
  }
}

// The (token, slot) pairs ordered by expert: expert e's pairs take rows
// offsets[e] .. offsets[e+1] of the grouped buffers, in token order, and
// row_of[pair] is a pair's row.
struct ExpertGroups {
  int32_t* offsets;  // [E + 1]
  int32_t* row_of;  // [pairs]
};

inline void group_by_expert(const ExpertGroups& g, const int32_t* chosen, const RoutingShape& s) {
  const int64_t E = s.n_experts, n = s.pairs();
  std::fill(g.offsets, g.offsets + E + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++g.offsets[chosen[i] + 1];
  for (int64_t e = 0; e < E; ++e) g.offsets[e + 1] += g.offsets[e];
  int32_t next[kMaxExperts];
  std::copy(g.offsets, g.offsets + E, next);
  for (int64_t i = 0; i < n; ++i) g.row_of[i] = next[chosen[i]]++;
}

}  // namespace ggtrain::kernels
