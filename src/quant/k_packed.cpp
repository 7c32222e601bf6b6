#include <algorithm>
#include <cstring>

#include "kernels/parallel.h"
#include "quant/k_rows.h"
#include "util/error.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define GGTRAIN_K_PACKED 1
// GCC 12 warns about the undefined source operand inside its own AVX-512
// intrinsics (a known false positive; see kernels/vexp.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ggtrain::quant {

namespace {
constexpr int64_t QK = 256, kGroup = 16;
}  // namespace

bool KPacked::available() {
#if defined(GGTRAIN_K_PACKED)
  return true;
#else
  return false;
#endif
}

// Where weight i of 256-block b of row lane of row group g lives: its byte,
// and for 4-bit quants which half (chunk 2c in the low nibble, 2c + 1 in
// the high one of the same byte).
size_t KPacked::byte_of(int64_t g, int64_t lane, int64_t b, int64_t i) const {
  const int64_t blocks = cols / QK, chunk = i / 4;
  const int64_t chunk_bytes = nibbles ? chunk / 2 : chunk, chunks = nibbles ? QK / 8 : QK / 4;
  return size_t(((g * blocks + b) * chunks + chunk_bytes) * 64 + lane * 4 + i % 4);
}

int KPacked::quant_at(size_t byte, int64_t i) const {
  if (!nibbles) return q[byte];
  return (i / 4) % 2 ? q[byte] >> 4 : q[byte] & 0x0F;
}

KPacked KPacked::pack(const KRows& k) {
  KPacked p;
  p.rows = k.rows, p.cols = k.cols, p.group = k.group, p.shift = k.group == 16 ? 32 : 0;
  // Q4_K's quants are 0..15: two to a byte halve what decode reads.
  p.nibbles = p.shift == 0 && std::all_of(k.q.begin(), k.q.end(), [](int8_t v) { return v >= 0 && v < 16; });
  const int64_t groups = (k.rows + kGroup - 1) / kGroup, per_row = k.cols / k.group, blocks = k.cols / QK;
  p.q.assign(size_t(groups * blocks * QK * kGroup / (p.nibbles ? 2 : 1)), 0);
  p.scale.assign(size_t(groups * per_row * kGroup), 0.0f);
  p.offset.assign(p.scale.size(), 0.0f);
  for (int64_t r = 0; r < k.rows; ++r) {
    const int64_t g = r / kGroup, lane = r % kGroup;
    for (int64_t c = 0; c < k.cols; ++c) {
      const int64_t b = c / QK, i = c % QK;
      const auto v = uint8_t(k.q[size_t(r * k.cols + c)] + p.shift);
      uint8_t& byte = p.q[p.byte_of(g, lane, b, i)];
      byte = !p.nibbles ? v : (i / 4) % 2 ? uint8_t(byte | v << 4) : uint8_t(byte | v);
    }
    for (int64_t j = 0; j < per_row; ++j) {
      const float s = k.scale[size_t(r * per_row + j)];
      p.scale[size_t((g * per_row + j) * kGroup + lane)] = s;
      p.offset[size_t((g * per_row + j) * kGroup + lane)] = k.offset[size_t(r * per_row + j)] + float(p.shift) * s;
    }
  }
  return p;
}

void KPacked::row(int64_t r, float* out) const {
  const int64_t g = r / kGroup, lane = r % kGroup, per_row = cols / group;
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t b = c / QK, i = c % QK;
    const int q8 = quant_at(byte_of(g, lane, b, i), i);
    const size_t at = size_t((g * per_row + c / group) * kGroup + lane);
    // ggml: d * sc * (q - 32) for Q6_K, d * sc * q - dmin * m otherwise
    out[c] = shift ? scale[at] * float(q8 - shift) : scale[at] * float(q8) - offset[at];
  }
}

#if defined(GGTRAIN_K_PACKED)
namespace {

// The two chunks' quants of 16 rows x 4 weights at wq: two 64-byte loads,
// or one of nibbles (the first chunk low, the second high).
template <bool kNibbles>
inline void load_chunk_pair(const uint8_t* wq, __m512i& first, __m512i& second) {
  if constexpr (kNibbles) {
    const __m512i v = _mm512_loadu_si512(wq), low = _mm512_set1_epi8(0x0F);
    first = _mm512_and_si512(v, low);
    second = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
  } else {
    first = _mm512_loadu_si512(wq);
    second = _mm512_loadu_si512(wq + 64);
  }
}

template <int T, bool kNibbles>
void group_tile(const KPacked& w, int64_t g, const Q8KActivations* x, float* y, int64_t row_stride,
                __mmask16 valid) {
  const int64_t blocks = w.cols / QK, per_block = QK / w.group, per_row = w.cols / w.group;
  const int64_t chunks = w.group / 4, chunk_bytes = kNibbles ? 32 : 64;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512 blk[T];
    for (int t = 0; t < T; ++t) blk[t] = _mm512_setzero_ps();
    for (int64_t j = 0; j < per_block; ++j) {
      const uint8_t* wq = w.q.data() + ((g * blocks + b) * (QK / 4) + j * chunks) * chunk_bytes;
      const int64_t at = (g * per_row + b * per_block + j) * kGroup;
      const __m512 s = _mm512_loadu_ps(w.scale.data() + at), o = _mm512_loadu_ps(w.offset.data() + at);
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = x[t].q.data() + b * QK + j * w.group;
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        for (int64_t c = 0; c < chunks; c += 2) {
          int32_t a0, a1;
          std::memcpy(&a0, xq + 4 * c, 4);
          std::memcpy(&a1, xq + 4 * c + 4, 4);
          __m512i q0, q1;
          load_chunk_pair<kNibbles>(wq + chunk_bytes * c, q0, q1);
          s0 = _mm512_dpbusd_epi32(s0, q0, _mm512_set1_epi32(a0));
          s1 = _mm512_dpbusd_epi32(s1, q1, _mm512_set1_epi32(a1));
        }
        const float gsum = float(x[t].group_sum[size_t(b * per_block + j)]);
        blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), s, blk[t]);
        blk[t] = _mm512_fnmadd_ps(o, _mm512_set1_ps(gsum), blk[t]);
      }
    }
    for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(blk[t], _mm512_set1_ps(x[t].d[size_t(b)]), acc[t]);
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + int64_t(t) * row_stride, valid, acc[t]);
}

template <bool kNibbles>
void group_rows(const KPacked& w, int64_t g, const Q8KActivations* xs, int64_t n, float* y) {
  constexpr int64_t kTile = 4;
  const int64_t live = std::min(kGroup, w.rows - g * kGroup);
  const auto valid = __mmask16((1u << live) - 1);
  float* yg = y + g * kGroup;
  int64_t t = 0;
  for (; t + kTile <= n; t += kTile) group_tile<kTile, kNibbles>(w, g, xs + t, yg + t * w.rows, w.rows, valid);
  for (; t < n; ++t) group_tile<1, kNibbles>(w, g, xs + t, yg + t * w.rows, w.rows, valid);
}

}  // namespace

void k_packed_matmul(const KPacked& w, const float* x, int64_t n, float* y) {
  thread_local std::vector<Q8KActivations> xq;
  if (int64_t(xq.size()) < n) xq.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) xq[size_t(i)].quantize(x + i * w.cols, w.cols, w.group);
  const Q8KActivations* xs = xq.data();
  const int64_t groups = (w.rows + kGroup - 1) / kGroup;
#pragma omp parallel for schedule(static) if (n * w.rows * w.cols >= kernels::kMinParallelWork)
  for (int64_t g = 0; g < groups; ++g) {
    if (w.nibbles)
      group_rows<true>(w, g, xs, n, y);
    else
      group_rows<false>(w, g, xs, n, y);
  }
}
#else
void k_packed_matmul(const KPacked&, const float*, int64_t, float*) {
  fail("k_packed_matmul: this build has no AVX512-VNNI kernels (check KPacked::available())");
}
#endif

}  // namespace ggtrain::quant
