#pragma once
// The dot product of a Q8_0 weight row with Q8_0-quantized activations, as
// ggml_vec_dot_q8_0_q8_0 computes it: per block of 32 an integer dot
// product, times both fp16 scales, summed in float. Vectorised with
// AVX512-VNNI (vpdpbusd on 256-bit lanes) or AVX2 (pmaddubsw) where the
// build targets them (-march=native), scalar otherwise; the integer sums are
// exact either way, only the order of the float sum differs.
#include <cstdint>
#include <cstring>

#include "kernels/number_formats.h"

#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

namespace ggtrain::kernels {

inline float q8_block_scale(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
#if defined(__F16C__)
  return _cvtsh_ss(h);  // one instruction; the same value as fp16_to_fp32
#else
  return fp16_to_fp32(h);
#endif
}

inline float dot_q8_0_scalar(const uint8_t* w, const uint8_t* x, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / int64_t(kQ8Block); ++b) {
    const uint8_t* wb = w + b * kQ8BlockBytes;
    const uint8_t* xb = x + b * kQ8BlockBytes;
    const auto* qw = reinterpret_cast<const int8_t*>(wb + 2);
    const auto* qx = reinterpret_cast<const int8_t*>(xb + 2);
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += int32_t(qw[j]) * int32_t(qx[j]);
    acc += q8_block_scale(wb) * q8_block_scale(xb) * float(s);
  }
  return acc;
}

#if defined(__AVX2__) && defined(__FMA__)
// Eight int32 partial sums of the 32 products of one block pair. The
// unsigned x signed multiply needs |w| and x carrying w's sign (ggml's trick;
// Q8_0 values lie in [-127, 127], so neither overflows).
inline __m256i q8_block_products(const int8_t* qw, const int8_t* qx) {
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qw));
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qx));
  const __m256i aw = _mm256_sign_epi8(w, w), sx = _mm256_sign_epi8(x, w);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1));
#endif
}

inline float dot_q8_0(const uint8_t* w, const uint8_t* x, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / int64_t(kQ8Block); ++b) {
    const uint8_t* wb = w + b * kQ8BlockBytes;
    const uint8_t* xb = x + b * kQ8BlockBytes;
    const __m256 p = _mm256_cvtepi32_ps(
        q8_block_products(reinterpret_cast<const int8_t*>(wb + 2), reinterpret_cast<const int8_t*>(xb + 2)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(q8_block_scale(wb) * q8_block_scale(xb)), p, acc);
  }
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
#else
inline float dot_q8_0(const uint8_t* w, const uint8_t* x, int64_t n) { return dot_q8_0_scalar(w, x, n); }
#endif

}  // namespace ggtrain::kernels
