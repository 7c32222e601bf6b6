#pragma once
// Softmax cross-entropy over the vocabulary, one row of logits at a time.
// Training runs it on chunks of rows (model/transformer.cpp): the fused form
// computes the loss and turns the chunk's logits into their gradient in
// place, so no [N, V] buffer of logits or gradients exists beyond a chunk.
#include <cmath>
#include <cstdint>

#include "kernels/vexp.h"

namespace ggtrain::kernels {

// A negative target carries no loss (a prompt token of an instruction
// example, padding): its row's loss is 0 and its logits get no gradient.
// kNoTarget is the one the data pipeline writes (corpus::kNoTarget).
constexpr int32_t kNoTarget = -1;

// -log softmax(z)[target] of one row of V logits, summed in double: what
// scoring (perplexity, `ggtrain eval`) reports. llama.cpp's perplexity tool
// forms it the same way (differences to the row's maximum in float, the sum
// of their exponentials in double).
inline double token_nll(const float* z, int64_t V, int32_t target) {
  float maxv = z[0];
  for (int64_t v = 1; v < V; ++v) maxv = z[v] > maxv ? z[v] : maxv;
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v] - maxv));
  return std::log(sum) - double(z[target] - maxv);
}

// losses[n] = lse(logits[n]) - logits[n][target[n]] (0 for a negative target);
// lse[n] saved. The logits are left intact.
template <typename T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets, int64_t N, int64_t V) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* z = logits + n * V;
    const T maxv = max_of(z, V);
    const T sum = sum_exp_shift(z, V, maxv);
    lse[n] = maxv + std::log(sum);
    losses[n] = targets[n] < 0 ? T(0) : lse[n] - z[targets[n]];
  }
}

// logits[n] <- dloss * (softmax(logits[n]) - onehot(target[n])), in place,
// from the lse that cross_entropy_forward saved (0 for a negative target).
template <typename T>
void cross_entropy_backward_inplace(T* logits, const T* lse, const int32_t* targets, int64_t N, int64_t V, T dloss) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* z = logits + n * V;
    if (targets[n] < 0) {
      for (int64_t i = 0; i < V; ++i) z[i] = 0;
      continue;
    }
    exp_shift(z, V, lse[n]);
#pragma omp simd
    for (int64_t i = 0; i < V; ++i) z[i] *= dloss;
    z[targets[n]] -= dloss;
  }
}

// logits[n] <- d[n] * (softmax(logits[n]) - onehot(target[n])), in place,
// from the lse that cross_entropy_forward saved: a loss weighted per row
// (0 for a negative target).
template <typename T>
void cross_entropy_backward_weighted(T* logits, const T* lse, const int32_t* targets, int64_t N, int64_t V,
                                     const T* d) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* z = logits + n * V;
    if (targets[n] < 0 || d[n] == T(0)) {
      for (int64_t i = 0; i < V; ++i) z[i] = 0;
      continue;
    }
    exp_shift(z, V, lse[n]);
    const T dn = d[n];
#pragma omp simd
    for (int64_t i = 0; i < V; ++i) z[i] *= dn;
    z[targets[n]] -= dn;
  }
}

// Both at once: losses[n] and lse[n] as cross_entropy_forward, and logits[n]
// <- dloss * (softmax(logits[n]) - onehot(target[n])) (0 for a negative target).
// Three passes over a row (max, exp and sum, scale) while it is in cache.
template <typename T>
void cross_entropy_fused(T* losses, T* lse, T* logits, const int32_t* targets, int64_t N, int64_t V, T dloss) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* z = logits + n * V;
    const bool counted = targets[n] >= 0;
    const T maxv = max_of(z, V);
    const T target_logit = counted ? z[targets[n]] : T(0);
    const T sum = exp_shift_sum(z, V, maxv);
    lse[n] = maxv + std::log(sum);
    losses[n] = counted ? lse[n] - target_logit : T(0);
    if (!counted) {
      for (int64_t i = 0; i < V; ++i) z[i] = 0;
      continue;
    }
    const T k = dloss / sum;
#pragma omp simd
    for (int64_t i = 0; i < V; ++i) z[i] *= k;
    z[targets[n]] -= dloss;
  }
}

}  // namespace ggtrain::kernels
