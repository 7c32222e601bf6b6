#pragma once
// RMSNorm as llama.cpp computes it: y = x / sqrt(mean(x^2) + eps) * w.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/bf16.h"
#include "kernels/parallel.h"

namespace ggtrain::kernels {

namespace detail {
// 1 / sqrt(mean(x^2) + eps) of one row as llama.cpp computes it
// (ggml_compute_forward_rms_norm_f32): each square rounded to T, summed in
// double, the mean rounded back to T. A sum in T, whose rounding depends on
// the vector width, gave another last bit on a fifth to a quarter of rows,
// enough for a Q8_0 model's activations to land on other int8 steps than
// llama.cpp's (logits off by a median 2.5e-3 on AVX-512).
template <typename T>
inline T rms_scale(double sum_of_squares, int64_t C, T eps) {
  const T mean = T(sum_of_squares / double(C));
  return T(1) / std::sqrt(mean + eps);
}

// y[c] = x[c] * r * w[c]: one normalised row, stored as Out.
template <typename T, typename Out>
inline void scale_row(Out* y, const T* x, T r, const T* w, int64_t C) {
  int64_t c = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {  // the scalar bf16 store does not vectorise
    const __m512 rv = _mm512_set1_ps(r);
    for (; c + 16 <= C; c += 16)
      store16(y + c, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + c), rv), _mm512_loadu_ps(w + c)));
  }
#endif
#pragma omp simd
  for (int64_t cc = c; cc < C; ++cc) store(y + cc, x[cc] * r * w[cc]);
}
}  // namespace detail

// out[N,C], rstd[N] (saved for backward) from inp[N,C], w[C]. out may be
// stored as bf16 (Out): it only feeds GEMMs.
template <typename T, typename Out>
void rmsnorm_forward(Out* out, T* rstd, const T* inp, const T* w, int64_t N, int64_t C, T eps) {
#pragma omp parallel for if (N * C >= kMinParallelWork)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    Out* y = out + n * C;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += double(x[c] * x[c]);
    const T r = detail::rms_scale(ss, C, eps);
    rstd[n] = r;
    detail::scale_row(y, x, r, w, C);
  }
}

// x += res, then out = rmsnorm(x) as rmsnorm_forward: the residual add that
// ends a block's attention half and the norm that starts its feed-forward
// half, in one pass over each row (one read of x less, one parallel region).
template <typename T, typename Out>
void residual_rmsnorm_forward(T* x, Out* out, T* rstd, const T* res, const T* w, int64_t N, int64_t C, T eps) {
#pragma omp parallel for if (N * C >= kMinParallelWork)
  for (int64_t n = 0; n < N; ++n) {
    T* xr = x + n * C;
    const T* rr = res + n * C;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) {
      xr[c] += rr[c];
      ss += double(xr[c] * xr[c]);
    }
    const T r = detail::rms_scale(ss, C, eps);
    rstd[n] = r;
    detail::scale_row(out + n * C, xr, r, w, C);
  }
}

// dinp[N,C] += d/dx, dw[C] += d/dw (dw may be null). dw is reduced per channel over all rows
// in row order, so the result does not depend on the thread count.
template <typename T>
void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int64_t N, int64_t C) {
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
