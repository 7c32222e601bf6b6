#pragma once
// A register-blocked GEMM on bf16 for attention's small tiles (bf16
// training), called from inside parallel regions:
//   C[M, N] = alpha * A[M, K] B[K, N]  (+ C when accumulate), float C.
// Both operands come as pairs of bf16 along K in 32-bit words (K even:
// callers pad with zeros): B "VNNI"-packed, pair (k, k+1) of column n at
// Bp[(k / 2) * ldb + n]; A's pair (k, k+1) of row m at Ap[m * sam + (k / 2) *
// sak] -- a row-major bf16 A has sam = lda / 2, sak = 1, and pairs packed
// along K for B serve as a transposed A with sam = 1, sak = their ldb. One
// AVX512_BF16 vdpbf16ps multiplies two k at once in float. oneDNN's bf16
// matmul costs microseconds per call to set up, more than these tiles take;
// its sgemm runs them at float speed.
#include <cstdint>

#include "kernels/bf16.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace ggtrain::kernels {

// Whether tile_gemm_bf16 runs on AVX512_BF16 here (else a scalar loop).
constexpr bool kNativeTileBf16 =
#if defined(__AVX512BF16__)
    true;
#else
    false;
#endif

#if defined(__AVX512BF16__)
namespace detail {
// 16 floats rounded to bf16, as the 16-bit integers they are.
inline __m256i bf16x16(__m512 x) {
  const __m256bh h = _mm512_cvtneps_pbh(x);
  __m256i r;
  __builtin_memcpy(&r, &h, sizeof r);
  return r;
}
}  // namespace detail
#endif

inline uint32_t bf16_pair(float lo, float hi) { return uint32_t(to_bf16(lo)) | (uint32_t(to_bf16(hi)) << 16); }

// Bp[(k / 2) * ldb + n] = (x[k][n], x[k + 1][n]) for the float matrix x
// [K, N] with row stride sx: pairs of consecutive rows, interleaved (odd K:
// the last pair's second half is 0).
inline void pack_row_pairs(uint32_t* Bp, int64_t ldb, const float* x, int64_t sx, int64_t K, int64_t N) {
  for (int64_t k = 0; k < K; k += 2) {
    const float* r0 = x + k * sx;
    const float* r1 = k + 1 < K ? r0 + sx : nullptr;
    uint32_t* out = Bp + (k / 2) * ldb;
    int64_t n = 0;
#if defined(__AVX512BF16__)
    for (; n + 16 <= N; n += 16) {  // (lo, hi) words: hi in the upper 16 bits
      const __m512i lo = _mm512_cvtepu16_epi32(detail::bf16x16(_mm512_loadu_ps(r0 + n)));
      const __m512i hi = r1 ? _mm512_cvtepu16_epi32(detail::bf16x16(_mm512_loadu_ps(r1 + n))) : _mm512_setzero_si512();
      _mm512_storeu_si512(out + n, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
#endif
    for (; n < N; ++n) out[n] = bf16_pair(r0[n], r1 ? r1[n] : 0.f);
  }
}

// Bp[(k / 2) * ldb + n] = (x[n][k], x[n][k + 1]): pairs along the rows of
// the float matrix x [N, K] (row stride sx), i.e. the VNNI packing of x^T.
// Rows are rounded 16 at a time (a bf16 row is already its pairs), then the
// 32-bit pairs transposed. K <= 512.
inline void pack_col_pairs(uint32_t* Bp, int64_t ldb, const float* x, int64_t sx, int64_t K, int64_t N) {
  constexpr int64_t kRows = 16, kMaxK2 = 256;
  const int64_t K2 = (K + 1) / 2;
  alignas(64) uint32_t tmp[kRows * kMaxK2];
  for (int64_t n0 = 0; n0 < N; n0 += kRows) {
    const int64_t rows = n0 + kRows <= N ? kRows : N - n0;
    for (int64_t r = 0; r < rows; ++r) {
      bf16* t = reinterpret_cast<bf16*>(tmp + r * K2);
      to_bf16_row(t, x + (n0 + r) * sx, K);
      if (K % 2) t[K] = 0;
    }
    for (int64_t kk = 0; kk < K2; ++kk)
      for (int64_t r = 0; r < rows; ++r) Bp[kk * ldb + n0 + r] = tmp[r * K2 + kk];
  }
}

// a[i * lda + k] = bf16(x[i * sx + k]) for i < M, k < K, and a zero at k = K
// when K is odd (lda even): rows of a row-major bf16 A.
inline void pack_rows(bf16* a, int64_t lda, const float* x, int64_t sx, int64_t M, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    to_bf16_row(a + i * lda, x + i * sx, K);
    if (K % 2) a[i * lda + K] = 0;
  }
}

#if defined(__AVX512BF16__)
namespace detail {

template <int MR, int NV>
inline void tile_bf16_block(int64_t K2, float alpha, const uint32_t* Ap, int64_t sam, int64_t sak, const uint32_t* Bp,
                            int64_t ldb, bool accumulate, float* C, int64_t ldc, __mmask16 last) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < K2; ++kk) {
    __m512i b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      b[v] = v + 1 < NV ? _mm512_loadu_si512(Bp + kk * ldb + 16 * v)
                        : _mm512_maskz_loadu_epi32(last, Bp + kk * ldb + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i a = _mm512_set1_epi32(int(Ap[r * sam + kk * sak]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[r][v] =
            _mm512_dpbf16_ps(acc[r][v], reinterpret_cast<const __m512bh&>(a), reinterpret_cast<const __m512bh&>(b[v]));
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* c = C + r * ldc + 16 * v;
      const __mmask16 m = v + 1 < NV ? __mmask16(0xffff) : last;
      __m512 x = _mm512_mul_ps(acc[r][v], al);
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, c));
      _mm512_mask_storeu_ps(c, m, x);
    }
}

// Every row of a strip NV vectors wide: blocks of 6 rows, then the rest
// with a block of exactly that many rows (no row test in the inner loop).
template <int NV>
inline void tile_bf16_strip(int64_t M, int64_t K2, float alpha, const uint32_t* Ap, int64_t sam, int64_t sak,
                            const uint32_t* Bp, int64_t ldb, bool accumulate, float* C, int64_t ldc, __mmask16 last) {
  constexpr int MR = NV >= 3 ? 6 : 8;
  int64_t i = 0;
  for (; i + MR <= M; i += MR)
    tile_bf16_block<MR, NV>(K2, alpha, Ap + i * sam, sam, sak, Bp, ldb, accumulate, C + i * ldc, ldc, last);
  const uint32_t* a = Ap + i * sam;
  float* c = C + i * ldc;
  switch (M - i) {
    case 7: tile_bf16_block<7, NV>(K2, alpha, a, sam, sak, Bp, ldb, accumulate, c, ldc, last); break;
    case 6: tile_bf16_block<6, NV>(K2, alpha, a, sam, sak, Bp, ldb, accumulate, c, ldc, last); break;
    case 5: tile_bf16_block<5, NV>(K2, alpha, a, sam, sak, Bp, ldb, accumulate, c, ldc, last); break;
    case 4: tile_bf16_block<4, NV>(K2, alpha, a, sam, sak, Bp, ldb, accumulate, c, ldc, last); break;
    case 3: tile_bf16_block<3, NV>(K2, alpha, a, sam, sak, Bp, ldb, accumulate, c, ldc, last); break;
    case 2: tile_bf16_block<2, NV>(K2, alpha, a, sam, sak, Bp, ldb, accumulate, c, ldc, last); break;
    case 1: tile_bf16_block<1, NV>(K2, alpha, a, sam, sak, Bp, ldb, accumulate, c, ldc, last); break;
    default: break;
  }
}

}  // namespace detail
#endif

// K2 = K / 2 pairs (K padded to even with zeros by the packing).
inline void tile_gemm_bf16(int64_t M, int64_t N, int64_t K2, float alpha, const uint32_t* Ap, int64_t sam, int64_t sak,
                           const uint32_t* Bp, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
#if defined(__AVX512BF16__)
  int64_t j = 0;
  for (; j + 64 <= N; j += 64)
    detail::tile_bf16_strip<4>(M, K2, alpha, Ap, sam, sak, Bp + j, ldb, accumulate, C + j, ldc, 0xffff);
  const int64_t rest = N - j;
  if (rest > 0) {
    const __mmask16 last = __mmask16(rest % 16 ? (1u << (rest % 16)) - 1 : 0xffff);
    switch ((rest + 15) / 16) {
      case 1: detail::tile_bf16_strip<1>(M, K2, alpha, Ap, sam, sak, Bp + j, ldb, accumulate, C + j, ldc, last); break;
      case 2: detail::tile_bf16_strip<2>(M, K2, alpha, Ap, sam, sak, Bp + j, ldb, accumulate, C + j, ldc, last); break;
      default: detail::tile_bf16_strip<3>(M, K2, alpha, Ap, sam, sak, Bp + j, ldb, accumulate, C + j, ldc, last); break;
    }
  }
#else
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0;
      for (int64_t kk = 0; kk < K2; ++kk) {
        const uint32_t a = Ap[i * sam + kk * sak], b = Bp[kk * ldb + n];
        acc += from_bf16(bf16(a & 0xffff)) * from_bf16(bf16(b & 0xffff)) +
               from_bf16(bf16(a >> 16)) * from_bf16(bf16(b >> 16));
      }
      C[i * ldc + n] = alpha * acc + (accumulate ? C[i * ldc + n] : 0.f);
    }
#endif
}

}  // namespace ggtrain::kernels
