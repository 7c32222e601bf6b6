#pragma once
// Softmax cross-entropy over the vocabulary. Forward keeps the logits intact
// (callers and tests read them) and saves each row's log-sum-exp; backward
// turns the logits into their gradient in place, so no [N, V] buffer is added.
#include <cmath>
#include <cstdint>

namespace ggtrain::kernels {

// losses[n] = lse(logits[n]) - logits[n][target[n]]; lse[n] saved.
template <typename T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets, int64_t N,
                           int64_t V) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* z = logits + n * V;
    T maxv = -INFINITY;
    for (int64_t i = 0; i < V; ++i) maxv = z[i] > maxv ? z[i] : maxv;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < V; ++i) sum += std::exp(z[i] - maxv);
    lse[n] = maxv + std::log(sum);
    losses[n] = lse[n] - z[targets[n]];
  }
}

// logits[n] <- dloss * (softmax(logits[n]) - onehot(target[n])), in place.
template <typename T>
void cross_entropy_backward_inplace(T* logits, const T* lse, const int32_t* targets, int64_t N,
                                    int64_t V, T dloss) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* z = logits + n * V;
    const T l = lse[n];
#pragma omp simd
    for (int64_t i = 0; i < V; ++i) z[i] = std::exp(z[i] - l) * dloss;
    z[targets[n]] -= dloss;
  }
}

}  // namespace ggtrain::kernels
