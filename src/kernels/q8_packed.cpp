#include "kernels/q8_packed.h"

#include <algorithm>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define GGTRAIN_Q8_PACKED 1
// GCC 12 warns about the undefined source operand inside its own AVX-512
// intrinsics (a known false positive; see kernels/vexp.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/number_formats.h"
#include "kernels/parallel.h"
#include "util/error.h"

namespace ggtrain::kernels {

namespace {

constexpr int64_t kGroup = 16;  // rows per group (one zmm of int32/float)
constexpr int64_t kBlockQuants = 32 * kGroup;  // bytes of one block of a group

uint16_t block_scale_bits(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return h;
}

}  // namespace

bool Q8Packed::available() {
#if defined(GGTRAIN_Q8_PACKED)
  return true;
#else
  return false;
#endif
}

Q8Packed Q8Packed::pack(const uint8_t* src, int64_t rows, int64_t cols) {
  if (cols % int64_t(kQ8Block) != 0) fail("Q8Packed: rows of {} are not whole Q8_0 blocks", cols);
  Q8Packed p;
  p.rows = rows, p.cols = cols;
  const int64_t groups = (rows + kGroup - 1) / kGroup, blocks = cols / int64_t(kQ8Block);
  p.q.assign(size_t(groups * blocks * kBlockQuants), 128);  // padding rows: q_w = 0
  p.scale.assign(size_t(groups * blocks * kGroup), 0);
  const int64_t row_bytes = q8_0_row_bytes(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g = r / kGroup, lane = r % kGroup;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = src + r * row_bytes + b * int64_t(kQ8BlockBytes);
      const auto* qw = reinterpret_cast<const int8_t*>(blk + 2);
      uint8_t* dst = p.q.data() + (g * blocks + b) * kBlockQuants;
      for (int64_t k = 0; k < 32; ++k) dst[(k / 4) * 64 + lane * 4 + k % 4] = uint8_t(int(qw[k]) + 128);
      p.scale[size_t((g * blocks + b) * kGroup + lane)] = block_scale_bits(blk);
    }
  }
  return p;
}

void Q8Packed::row(int64_t r, float* out) const {
  const int64_t g = r / kGroup, lane = r % kGroup, blocks = cols / int64_t(kQ8Block);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* src = q.data() + (g * blocks + b) * kBlockQuants;
    const float d = fp16_to_fp32(scale[size_t((g * blocks + b) * kGroup + lane)]);
    for (int64_t k = 0; k < 32; ++k) out[b * 32 + k] = float(int(src[(k / 4) * 64 + lane * 4 + k % 4]) - 128) * d;
  }
}

#if defined(GGTRAIN_Q8_PACKED)
namespace {

// T tokens (their int8 quants xq, scales dx and 128 * block sums xsum)
// times one row group: 16 outputs per token into y (row stride `rows`,
// `valid` rows of the 16).
template <int T>
void group_tile(const Q8Packed& w, int64_t g, const int8_t* xq, const float* dx, const int32_t* xsum, int64_t blocks,
                float* y, __mmask16 valid) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* wq = w.q.data() + (g * blocks + b) * kBlockQuants;
    __m512i wv[8];
    for (int j = 0; j < 8; ++j) wv[j] = _mm512_loadu_si512(wq + 64 * j);
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.scale.data() + (g * blocks + b) * kGroup)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8_t* xb = xq + (int64_t(t) * blocks + b) * 32;
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int j = 0; j < 8; j += 2) {
        int32_t a0, a1;
        std::memcpy(&a0, xb + 4 * j, 4);
        std::memcpy(&a1, xb + 4 * j + 4, 4);
        s0 = _mm512_dpbusd_epi32(s0, wv[j], _mm512_set1_epi32(a0));
        s1 = _mm512_dpbusd_epi32(s1, wv[j + 1], _mm512_set1_epi32(a1));
      }
      const __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(xsum[int64_t(t) * blocks + b]));
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx[int64_t(t) * blocks + b]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + int64_t(t) * w.rows, valid, acc[t]);
}

}  // namespace

void q8_packed_matmul(const Q8Packed& w, const uint8_t* xq_blocks, int64_t n, float* y) {
  const int64_t blocks = w.cols / int64_t(kQ8Block), groups = (w.rows + kGroup - 1) / kGroup;
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> dx;
  thread_local std::vector<int32_t> xsum;
  xq.resize(size_t(n * w.cols));
  dx.resize(size_t(n * blocks));
  xsum.resize(size_t(n * blocks));
  for (int64_t i = 0; i < n * blocks; ++i) {
    const uint8_t* blk = xq_blocks + i * int64_t(kQ8BlockBytes);
    dx[size_t(i)] = fp16_to_fp32(block_scale_bits(blk));
    int32_t sum = 0;
    for (int k = 0; k < 32; ++k) sum += xq[size_t(i * 32 + k)] = int8_t(blk[2 + k]);
    xsum[size_t(i)] = 128 * sum;
  }
  const int8_t* xqp = xq.data();
  const float* dxp = dx.data();
  const int32_t* xsp = xsum.data();
  constexpr int64_t kTile = 4;
#pragma omp parallel for schedule(static) if (n * w.rows * w.cols >= kMinParallelWork)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t live = std::min(kGroup, w.rows - g * kGroup);
    const auto valid = __mmask16((1u << live) - 1);
    float* yg = y + g * kGroup;
    int64_t t = 0;
    for (; t + kTile <= n; t += kTile)
      group_tile<kTile>(w, g, xqp + t * w.cols, dxp + t * blocks, xsp + t * blocks, blocks, yg + t * w.rows, valid);
    for (; t < n; ++t)
      group_tile<1>(w, g, xqp + t * w.cols, dxp + t * blocks, xsp + t * blocks, blocks, yg + t * w.rows, valid);
  }
}
#else
void q8_packed_matmul(const Q8Packed&, const uint8_t*, int64_t, float*) {
  fail("q8_packed_matmul: this build has no AVX512-VNNI kernels (check Q8Packed::available())");
}
#endif

}  // namespace ggtrain::kernels
