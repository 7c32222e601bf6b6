#pragma once
// RMSNorm as llama.cpp computes it: y = x / sqrt(mean(x^2) + eps) * w.
#include <cmath>
#include <cstdint>

#include "kernels/parallel.h"

namespace ggtrain::kernels {

// out[N,C], rstd[N] (saved for backward) from inp[N,C], w[C].
template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* w, int64_t N, int64_t C, T eps) {
#pragma omp parallel for if (N * C >= kMinParallelWork)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    T* y = out + n * C;
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
    T r = T(1) / std::sqrt(ss / T(C) + eps);
    rstd[n] = r;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * r * w[c];
  }
}

// dinp[N,C] += d/dx, dw[C] += d/dw (dw may be null). dw is reduced per channel over all rows
// in row order, so the result does not depend on the thread count.
template <typename T>
void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd,
                      int64_t N, int64_t C) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    T* dx = dinp + n * C;
    const T r = rstd[n];
    T dot = 0;  // sum_c dy*w*x
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < C; ++c) dot += dy[c] * w[c] * x[c];
    const T k = dot * r * r * r / T(C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dx[c] += dy[c] * w[c] * r - x[c] * k;
  }
  if (!dw) return;  // a frozen norm weight
  constexpr int64_t kChunk = 16;
#pragma omp parallel for
  for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
    const int64_t c1 = c0 + kChunk < C ? c0 + kChunk : C;
    T acc[kChunk] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T r = rstd[n];
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += dout[n * C + c] * inp[n * C + c] * r;
    }
    for (int64_t c = c0; c < c1; ++c) dw[c] += acc[c - c0];
  }
}

}  // namespace ggtrain::kernels
