#include "kernels/q8_packed.h"

#include <algorithm>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define GGTRAIN_Q8_PACKED 1
#endif

#include "kernels/number_formats.h"
#include "kernels/parallel.h"
#include "util/error.h"

namespace ggtrain::kernels {

namespace {

constexpr int64_t kGroup = 16;                  // rows per group (one zmm of int32/float)
constexpr int64_t kBlockQuants = 32 * kGroup;   // bytes of one block of a group

float block_scale(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return fp16_to_fp32(h);
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
  p.q.assign(size_t(groups * blocks * kBlockQuants), 0);
  p.scale.assign(size_t(groups * blocks * kGroup), 0.0f);
  p.correction.assign(p.scale.size(), 0.0f);
  const int64_t row_bytes = q8_0_row_bytes(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g = r / kGroup, lane = r % kGroup;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = src + r * row_bytes + b * int64_t(kQ8BlockBytes);
      const auto* qw = reinterpret_cast<const int8_t*>(blk + 2);
      int8_t* dst = p.q.data() + (g * blocks + b) * kBlockQuants;
      int32_t sum = 0;
      for (int64_t k = 0; k < 32; ++k) {
        dst[(k / 4) * 64 + lane * 4 + k % 4] = qw[k];
        sum += qw[k];
      }
      const size_t s = size_t((g * blocks + b) * kGroup + lane);
      p.scale[s] = block_scale(blk);
      p.correction[s] = 128.0f * p.scale[s] * float(sum);
    }
  }
  return p;
}

void Q8Packed::row(int64_t r, float* out) const {
  const int64_t g = r / kGroup, lane = r % kGroup, blocks = cols / int64_t(kQ8Block);
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* src = q.data() + (g * blocks + b) * kBlockQuants;
    const float d = scale[size_t((g * blocks + b) * kGroup + lane)];
    for (int64_t k = 0; k < 32; ++k) out[b * 32 + k] = float(src[(k / 4) * 64 + lane * 4 + k % 4]) * d;
  }
}

#if defined(GGTRAIN_Q8_PACKED)
namespace {

// T tokens (their unsigned quants xu and scales dx) times one row group:
// 16 outputs per token into y (row stride `rows`, `valid` rows of the 16).
template <int T>
void group_tile(const Q8Packed& w, int64_t g, const uint8_t* xu, const float* dx, int64_t blocks, float* y,
                __mmask16 valid) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* wq = w.q.data() + (g * blocks + b) * kBlockQuants;
    __m512i wv[8];
    for (int j = 0; j < 8; ++j) wv[j] = _mm512_loadu_si512(wq + 64 * j);
    const __m512 dw = _mm512_loadu_ps(w.scale.data() + (g * blocks + b) * kGroup);
    const __m512 corr = _mm512_loadu_ps(w.correction.data() + (g * blocks + b) * kGroup);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = xu + (int64_t(t) * blocks + b) * 32;
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int j = 0; j < 8; j += 2) {
        int32_t a0, a1;
        std::memcpy(&a0, xb + 4 * j, 4);
        std::memcpy(&a1, xb + 4 * j + 4, 4);
        s0 = _mm512_dpbusd_epi32(s0, _mm512_set1_epi32(a0), wv[j]);
        s1 = _mm512_dpbusd_epi32(s1, _mm512_set1_epi32(a1), wv[j + 1]);
      }
      const __m512 v = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), dw, corr);
      acc[t] = _mm512_fmadd_ps(v, _mm512_set1_ps(dx[int64_t(t) * blocks + b]), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + int64_t(t) * w.rows, valid, acc[t]);
}

}  // namespace

void q8_packed_matmul(const Q8Packed& w, const uint8_t* xq, int64_t n, float* y) {
  const int64_t blocks = w.cols / int64_t(kQ8Block), groups = (w.rows + kGroup - 1) / kGroup;
  thread_local std::vector<uint8_t> xu;
  thread_local std::vector<float> dx;
  xu.resize(size_t(n * w.cols));
  dx.resize(size_t(n * blocks));
  for (int64_t i = 0; i < n * blocks; ++i) {
    const uint8_t* blk = xq + i * int64_t(kQ8BlockBytes);
    dx[size_t(i)] = block_scale(blk);
    for (int k = 0; k < 32; ++k) xu[size_t(i * 32 + k)] = uint8_t(int(int8_t(blk[2 + k])) + 128);
  }
  const uint8_t* xup = xu.data();
  const float* dxp = dx.data();
  constexpr int64_t kTile = 4;
#pragma omp parallel for schedule(static) if (n * w.rows * w.cols >= kMinParallelWork)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t live = std::min(kGroup, w.rows - g * kGroup);
    const auto valid = __mmask16((1u << live) - 1);
    float* yg = y + g * kGroup;
    int64_t t = 0;
    for (; t + kTile <= n; t += kTile)
      group_tile<kTile>(w, g, xup + t * w.cols, dxp + t * blocks, blocks, yg + t * w.rows, valid);
    for (; t < n; ++t) group_tile<1>(w, g, xup + t * w.cols, dxp + t * blocks, blocks, yg + t * w.rows, valid);
  }
}
#else
void q8_packed_matmul(const Q8Packed&, const uint8_t*, int64_t, float*) {
  fail("q8_packed_matmul: this build has no AVX512-VNNI kernels (check Q8Packed::available())");
}
#endif

}  // namespace ggtrain::kernels
