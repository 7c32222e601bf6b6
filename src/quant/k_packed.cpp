#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/parallel.h"
#include "quant/block_layout.h"
#include "quant/k_rows.h"
#include "quant/type_traits.h"
#include "util/error.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define GGTRAIN_K_PACKED 1
// GCC 12 warns about the undefined source operand inside its own AVX-512
// intrinsics (a known false positive; see kernels/vexp.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ggtrain::quant {

using gguf::TensorType;

namespace {
constexpr int64_t QK = 256, kGroup = 16;

// A block's quant i as stored (Q6_K made unsigned: q + 32), and the group
// factors ggml's dequantizer multiplies: w = d * sc * q - dmin * m (Q4_K,
// Q5_K) or d * sc * (q - 32) (Q6_K).
struct BlockFields {
  float d = 0, dmin = 0;
  int8_t sc[16] = {}, m[16] = {};
};

BlockFields fields_of(TensorType t, const uint8_t* b) {
  BlockFields f;
  if (t == TensorType::Q6_K) {
    f.d = detail::get_half(b + 208);
    std::memcpy(f.sc, b + 192, 16);
    return f;
  }
  f.d = detail::get_half(b), f.dmin = detail::get_half(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    detail::scale_min(j, b + 4, &sc, &m);
    f.sc[j] = int8_t(sc), f.m[j] = int8_t(m);
  }
  return f;
}

int stored_quant(TensorType t, const uint8_t* b, int i) {
  if (t == TensorType::Q4_K) return detail::q4_k_quant(b, i);
  if (t == TensorType::Q5_K) return detail::q5_k_quant(b, i);
  return detail::q6_k_quant(b, i) + 32;
}
}  // namespace

bool KPacked::available() {
#if defined(GGTRAIN_K_PACKED)
  return true;
#else
  return false;
#endif
}

size_t KPacked::low_byte(int64_t g, int64_t lane, int64_t b, int64_t i) const {
  return size_t(((g * blocks() + b) * (QK / 8) + i / 8) * 64 + lane * 4 + i % 4);
}

size_t KPacked::high_byte(int64_t g, int64_t lane, int64_t b, int64_t i) const {
  return size_t(((g * blocks() + b) * (QK / group) + i / group) * 64 + lane * 4 + i % 4);
}

int KPacked::quant(int64_t g, int64_t lane, int64_t b, int64_t i) const {
  const int chunk = int(i / 4);  // the pair's first chunk in the low nibbles
  const uint8_t lo = low[low_byte(g, lane, b, i)];
  int v = chunk % 2 ? lo >> 4 : lo & 0x0F;
  if (high_bits) {
    const int k = chunk % int(group / 4);  // the chunk's place in its group
    v |= ((high[high_byte(g, lane, b, i)] >> (high_bits * k)) & ((1 << high_bits) - 1)) << 4;
  }
  return v;
}

KPacked KPacked::pack(TensorType t, const uint8_t* data, int64_t rows, int64_t cols) {
  if (t != TensorType::Q4_K && t != TensorType::Q5_K && t != TensorType::Q6_K)
    fail("KPacked: {} is not a K-quant", gguf::type_name(t));
  if (cols % QK != 0) fail("KPacked: rows of {} are not a multiple of 256", cols);
  KPacked p;
  p.rows = rows, p.cols = cols;
  p.group = t == TensorType::Q6_K ? 16 : 32;
  p.shift = t == TensorType::Q6_K ? 32 : 0;
  p.high_bits = t == TensorType::Q4_K ? 0 : t == TensorType::Q5_K ? 1 : 2;
  const int64_t groups = (rows + kGroup - 1) / kGroup, blocks = p.blocks(), per_block = QK / p.group;
  const size_t block_bytes = traits(t).type_size;
  p.low.assign(size_t(groups * blocks * QK * kGroup / 2), 0);
  p.high.assign(p.high_bits ? size_t(groups * blocks * per_block * 64) : 0, 0);
  p.d.assign(size_t(groups * blocks * kGroup), 0.0f);
  p.dmin.assign(p.d.size(), 0.0f);
  p.sc.assign(size_t(groups * blocks * per_block * kGroup), 0);
  p.m.assign(p.sc.size(), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g = r / kGroup, lane = r % kGroup;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* src = data + size_t(r * blocks + b) * block_bytes;
      const BlockFields f = fields_of(t, src);
      p.d[size_t((g * blocks + b) * kGroup + lane)] = f.d;
      p.dmin[size_t((g * blocks + b) * kGroup + lane)] = f.dmin;
      for (int64_t j = 0; j < per_block; ++j) {
        p.sc[size_t(((g * blocks + b) * per_block + j) * kGroup + lane)] = f.sc[j];
        p.m[size_t(((g * blocks + b) * per_block + j) * kGroup + lane)] = f.m[j];
      }
      for (int i = 0; i < QK; ++i) {
        const int v = stored_quant(t, src, i), chunk = i / 4;
        p.low[p.low_byte(g, lane, b, i)] |= uint8_t((v & 0x0F) << (chunk % 2 ? 4 : 0));
        if (p.high_bits)
          p.high[p.high_byte(g, lane, b, i)] |= uint8_t((v >> 4) << (p.high_bits * (chunk % (p.group / 4))));
      }
    }
  }
  return p;
}

void KPacked::row(int64_t r, float* out) const {
  const int64_t g = r / kGroup, lane = r % kGroup, per_block = QK / group;
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t b = c / QK, i = c % QK, j = i / group;
    const size_t at_block = size_t((g * blocks() + b) * kGroup + lane);
    const size_t at_group = size_t(((g * blocks() + b) * per_block + j) * kGroup + lane);
    // The products ggml's dequantizer forms, in its order.
    const float s = d[at_block] * float(sc[at_group]), o = dmin[at_block] * float(m[at_group]);
    const int q = quant(g, lane, b, i);
    out[c] = shift ? s * float(q - shift) : s * float(q) - o;
  }
}

#if defined(GGTRAIN_K_PACKED)
namespace {

// Bits [4, 4 + kBits) of a chunk's quants from the high plane: chunk k of
// its group sits at bits [kBits * k, kBits * (k + 1)) of each byte.
template <int kBits, int kChunk>
inline __m512i high_part(__m512i h) {
  const __m512i mask = _mm512_set1_epi8(char(((1 << kBits) - 1) << 4));
  constexpr int at = kBits * kChunk;  // shifts in 16-bit lanes: the mask drops what crosses a byte
  if constexpr (at <= 4) return _mm512_and_si512(_mm512_slli_epi16(h, 4 - at), mask);
  else return _mm512_and_si512(_mm512_srli_epi16(h, at - 4), mask);
}

// sum over the group of q * qx per row (16 int32 lanes): the group's chunk
// pairs from the low plane, with their high bits where the type has them.
template <int kBits, int kChunks, int... P>
inline __m512i group_dot(const uint8_t* low, const uint8_t* high, const int8_t* xq, std::integer_sequence<int, P...>) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  [[maybe_unused]] const __m512i h = kBits ? _mm512_loadu_si512(high) : _mm512_setzero_si512();
  __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
  auto pair = [&]<int Pair>() {
    const __m512i v = _mm512_loadu_si512(low + 64 * Pair);
    __m512i q0 = _mm512_and_si512(v, nibble), q1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
    if constexpr (kBits > 0) {
      q0 = _mm512_or_si512(q0, high_part<kBits, 2 * Pair>(h));
      q1 = _mm512_or_si512(q1, high_part<kBits, 2 * Pair + 1>(h));
    }
    int32_t a0, a1;
    std::memcpy(&a0, xq + 8 * Pair, 4);
    std::memcpy(&a1, xq + 8 * Pair + 4, 4);
    s0 = _mm512_dpbusd_epi32(s0, q0, _mm512_set1_epi32(a0));
    s1 = _mm512_dpbusd_epi32(s1, q1, _mm512_set1_epi32(a1));
  };
  (pair.template operator()<P>(), ...);
  static_assert(sizeof...(P) * 2 == kChunks);
  return _mm512_add_epi32(s0, s1);
}

// y for T tokens and the 16 rows of row group g. kBits: 0 (Q4_K), 1 (Q5_K)
// or 2 (Q6_K, groups of 16).
template <int T, int kBits>
void group_tile(const KPacked& w, int64_t g, const Q8KActivations* x, float* y, int64_t row_stride, __mmask16 valid) {
  constexpr int64_t group = kBits == 2 ? 16 : 32, per_block = QK / group;
  constexpr int kChunks = int(group / 4);
  const int64_t blocks = w.blocks();
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t gb = g * blocks + b;
    const __m512 d = _mm512_loadu_ps(w.d.data() + gb * kGroup);
    [[maybe_unused]] const __m512 dmin = _mm512_loadu_ps(w.dmin.data() + gb * kGroup);
    __m512 blk[T];
    for (int t = 0; t < T; ++t) blk[t] = _mm512_setzero_ps();
    for (int64_t j = 0; j < per_block; ++j) {
      const uint8_t* low = w.low.data() + (gb * (QK / 8) + j * kChunks / 2) * 64;
      const uint8_t* high = kBits ? w.high.data() + (gb * per_block + j) * 64 : nullptr;
      const int8_t* scj = w.sc.data() + (gb * per_block + j) * kGroup;
      // s = d * sc and o = dmin * m (Q6_K: 32 s), the products ggml forms.
      const __m512 s = _mm512_mul_ps(
          d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scj)))));
      __m512 o;
      if constexpr (kBits == 2) {
        o = _mm512_mul_ps(s, _mm512_set1_ps(32.0f));
      } else {
        const int8_t* mj = w.m.data() + (gb * per_block + j) * kGroup;
        o = _mm512_mul_ps(
            dmin, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mj)))));
      }
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = x[t].q.data() + b * QK + j * group;
        const __m512i dot = group_dot<kBits, kChunks>(low, high, xq, std::make_integer_sequence<int, kChunks / 2>());
        const float gsum = float(x[t].group_sum[size_t(b * per_block + j)]);
        blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, blk[t]);
        blk[t] = _mm512_fnmadd_ps(o, _mm512_set1_ps(gsum), blk[t]);
      }
    }
    for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(blk[t], _mm512_set1_ps(x[t].d[size_t(b)]), acc[t]);
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + int64_t(t) * row_stride, valid, acc[t]);
}

template <int kBits>
void group_rows(const KPacked& w, int64_t g, const Q8KActivations* xs, int64_t n, float* y) {
  constexpr int64_t kTile = 4;
  const int64_t live = std::min(kGroup, w.rows - g * kGroup);
  const auto valid = __mmask16((1u << live) - 1);
  float* yg = y + g * kGroup;
  int64_t t = 0;
  for (; t + kTile <= n; t += kTile) group_tile<kTile, kBits>(w, g, xs + t, yg + t * w.rows, w.rows, valid);
  for (; t < n; ++t) group_tile<1, kBits>(w, g, xs + t, yg + t * w.rows, w.rows, valid);
}

}  // namespace

void k_packed_matmul(const KPacked& w, const float* x, int64_t n, float* y) {
  thread_local std::vector<Q8KActivations> xq;
  if (int64_t(xq.size()) < n) xq.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) xq[size_t(i)].quantize(x + i * w.cols, w.cols, w.group);
  const Q8KActivations* xs = xq.data();
  const int64_t groups = (w.rows + kGroup - 1) / kGroup;
  constexpr void (*kRows[])(const KPacked&, int64_t, const Q8KActivations*, int64_t, float*) = {
      group_rows<0>, group_rows<1>, group_rows<2>};
  const auto rows_of = kRows[w.high_bits];
#pragma omp parallel for schedule(static) if (n * w.rows * w.cols >= kernels::kMinParallelWork)
  for (int64_t g = 0; g < groups; ++g) rows_of(w, g, xs, n, y);
}
#else
void k_packed_matmul(const KPacked&, const float*, int64_t, float*) {
  fail("k_packed_matmul: this build has no AVX512-VNNI kernels (check KPacked::available())");
}
#endif

}  // namespace ggtrain::quant
