#pragma once
// Vectorised exp for the softmax loops (attention, cross-entropy). Without
// -ffast-math the compiler calls scalar expf per element, which made the
// softmax passes cost as much as the GEMMs around them. On AVX-512 this is
// the expf llama.cpp's CPU backend uses there (exp16 below).
// double always goes through std::exp (used by the gradient checks only).
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 warns about the undefined source operand inside its own AVX-512
// intrinsics (a known false positive) wherever they are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ggtrain::kernels {

#if defined(__AVX512F__)
// exp of 16 floats as ggml's CPU backend computes it on AVX-512
// (ggml_v_expf, from ARM's optimized-routines expf): the same constants and
// operations in the same order, so that SiLU and softmax round as
// llama.cpp's do there (activations later rounded to int8 steps amplify a
// last-bit difference). n = round(x / ln 2) by the 1.5 * 2^23 shift;
// b = x - n ln 2 in two parts; exp(b) by a degree-5 polynomial; times 2^n by
// vscalefps. Within 1.95 ulp of exp; |n| > 192 gives inf (x > 0) or 0.
inline __m512 exp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
  const __m512 n = _mm512_sub_ps(z, shift);
  const __m512 b =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 hi = _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f));
  const __m512 mid = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f));
  const __m512 lo = _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f));
  const __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(hi, u, mid), u, lo);
  const __m512 result = _mm512_scalef_ps(p, n);
  const __mmask16 out_of_range = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
  if (out_of_range == 0) return result;
  const __m512 zero = _mm512_setzero_ps();
  const __m512 inf_or_zero =
      _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ), _mm512_set1_ps(INFINITY), zero);
  return _mm512_mask_blend_ps(out_of_range, result, inf_or_zero);
}
#endif

// x[i] <- exp(x[i] - shift) for i < n; returns the sum of the results
// (accumulated in float lanes, then added up).
inline float exp_shift_sum(float* x, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0;
#if defined(__AVX512F__)
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
    _mm512_mask_storeu_ps(x + i, m, e);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, e));
    i = n;
  }
  sum = _mm512_reduce_add_ps(acc);
#endif
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

inline double exp_shift_sum(double* x, int64_t n, double shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

// Same as exp_shift_sum without the sum.
inline void exp_shift(float* x, int64_t n, float shift) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 s = _mm512_set1_ps(shift);
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
    i = n;
  }
#endif
  for (; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

inline void exp_shift(double* x, int64_t n, double shift) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

// sum of exp(x[i] - shift) for i < n; x is left as it is.
inline float sum_exp_shift(const float* x, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0;
#if defined(__AVX512F__)
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, e));
    i = n;
  }
  sum = _mm512_reduce_add_ps(acc);
#endif
  for (; i < n; ++i) sum += std::exp(x[i] - shift);
  return sum;
}

inline double sum_exp_shift(const double* x, int64_t n, double shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - shift);
  return sum;
}

// sum of x[0, n) in 16 double lanes (the compiler vectorizes the fixed
// inner loop): float lanes lose about 1e-6 relative over a 150k vocabulary.
template <typename T>
double sum_lanes(const T* x, int64_t n) {
  double lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += double(x[i + j]);
  double s = 0;
  for (double l : lanes) s += l;
  for (; i < n; ++i) s += double(x[i]);
  return s;
}

// max over x[0, n)
template <typename T>
T max_of(const T* x, int64_t n) {
  T m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace ggtrain::kernels
