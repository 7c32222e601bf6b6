#pragma once
// bfloat16 storage for mixed-precision training (train.precision = bf16):
// GEMM inputs are rounded to bf16, everything else (accumulation, norms,
// softmax, loss, master weights, optimizer) stays float.
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 warns about the undefined source operand inside its own AVX-512
// intrinsics (a known false positive) wherever they are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/parallel.h"

namespace ggtrain::kernels {

using bf16 = uint16_t;

// Round to nearest even, as vcvtneps2bf16 does. (A NaN may come out as Inf:
// both stay non-finite, which is all training checks.)
inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float from_bf16(bf16 h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Stores v into a float or a bf16 element: kernels that produce GEMM inputs
// are templated on their output type.
inline void store(float* p, float v) { *p = v; }
inline void store(double* p, double v) { *p = v; }
inline void store(bf16* p, float v) { *p = to_bf16(v); }
inline float load(const float* p) { return *p; }
inline double load(const double* p) { return *p; }
inline float load(const bf16* p) { return from_bf16(*p); }

#if defined(__AVX512F__)
// 16 lanes at a time, for the vectorised kernels that write GEMM inputs.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const bf16* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
inline void store16(bf16* p, __m512 v) {
#if defined(__AVX512BF16__)
  const __m256bh h = _mm512_cvtneps_pbh(v);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<const __m256i&>(h));
#else  // round to nearest even by integer arithmetic, as to_bf16
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
#endif
}
#endif

// o[i] = bf16(x[i]), i < n, on the calling thread (kernels inside parallel
// regions use it: a nested parallel region costs more than the row).
inline void to_bf16_row(bf16* o, const float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) store16(o + i, _mm512_loadu_ps(x + i));
#endif
  for (; i < n; ++i) o[i] = to_bf16(x[i]);
}

// out[i] = bf16(x[i]) for rows of n elements with strides (elements).
inline void to_bf16_rows(bf16* out, int64_t out_stride, const float* x, int64_t x_stride, int64_t rows, int64_t n) {
#pragma omp parallel for schedule(static) if (rows * n >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) to_bf16_row(out + r * out_stride, x + r * x_stride, n);
}

inline void to_bf16(bf16* out, const float* x, int64_t n) {
  constexpr int64_t kRow = 4096;  // rows of a flat array, for the parallel loop
  to_bf16_rows(out, kRow, x, kRow, n / kRow, kRow);
  to_bf16_rows(out + n / kRow * kRow, 0, x + n / kRow * kRow, 0, n % kRow ? 1 : 0, n % kRow);
}

}  // namespace ggtrain::kernels
