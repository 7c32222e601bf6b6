#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/parallel.h"
#include "quant/block_layout.h"
#include "quant/k_rows.h"
#include "quant/type_traits.h"
#include "util/error.h"

#if (defined(__AVX512F__) && defined(__AVX512VNNI__)) || (defined(__AVX2__) && defined(__FMA__))
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

}  // namespace

bool KPacked::available() {  // AVX512F + AVX512-VNNI, or AVX2 + FMA
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
      const detail::KBlockFields f = detail::k_block_fields(t, src);
      p.d[size_t((g * blocks + b) * kGroup + lane)] = f.d;
      p.dmin[size_t((g * blocks + b) * kGroup + lane)] = f.dmin;
      for (int64_t j = 0; j < per_block; ++j) {
        p.sc[size_t(((g * blocks + b) * per_block + j) * kGroup + lane)] = f.sc[j];
        p.m[size_t(((g * blocks + b) * per_block + j) * kGroup + lane)] = f.m[j];
      }
      for (int i = 0; i < QK; ++i) {
        const int v = detail::k_stored_quant(t, src, i), chunk = i / 4;
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

// One vector holds a row group's 16 rows with AVX-512 and VNNI, half of
// them (8) with AVX2, where vpmaddubsw + vpmaddwd give vpdpbusd's sums
// exactly (a pair of products is at most 2 * 63 * 127, inside int16).
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
using IVec = __m512i;
using FVec = __m512;
constexpr int64_t kRowsPerVec = 16;
inline IVec iload(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline IVec iand(IVec a, IVec b) { return _mm512_and_si512(a, b); }
inline IVec ior(IVec a, IVec b) { return _mm512_or_si512(a, b); }
inline IVec ibytes(int c) { return _mm512_set1_epi8(char(c)); }
inline IVec izero() { return _mm512_setzero_si512(); }
inline IVec iadd(IVec a, IVec b) { return _mm512_add_epi32(a, b); }
template <int S>
inline IVec shl16(IVec v) {
  return _mm512_slli_epi16(v, S);
}
template <int S>
inline IVec shr16(IVec v) {
  return _mm512_srli_epi16(v, S);
}
// acc += per row, the dot product of 4 unsigned quants and 4 int8 activations
inline IVec dot4(IVec acc, IVec q, int32_t x4) { return _mm512_dpbusd_epi32(acc, q, _mm512_set1_epi32(x4)); }
inline FVec fload(const float* p) { return _mm512_loadu_ps(p); }
inline FVec fwiden(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline FVec fzero() { return _mm512_setzero_ps(); }
inline FVec fset(float x) { return _mm512_set1_ps(x); }
inline FVec fint(IVec v) { return _mm512_cvtepi32_ps(v); }
inline FVec fmul(FVec a, FVec b) { return _mm512_mul_ps(a, b); }
inline FVec ffma(FVec a, FVec b, FVec c) { return _mm512_fmadd_ps(a, b, c); }
inline FVec ffnma(FVec a, FVec b, FVec c) { return _mm512_fnmadd_ps(a, b, c); }
inline void fstore_rows(float* y, FVec v, int64_t live) { _mm512_mask_storeu_ps(y, __mmask16((1u << live) - 1), v); }
#else
using IVec = __m256i;
using FVec = __m256;
constexpr int64_t kRowsPerVec = 8;
inline IVec iload(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline IVec iand(IVec a, IVec b) { return _mm256_and_si256(a, b); }
inline IVec ior(IVec a, IVec b) { return _mm256_or_si256(a, b); }
inline IVec ibytes(int c) { return _mm256_set1_epi8(char(c)); }
inline IVec izero() { return _mm256_setzero_si256(); }
inline IVec iadd(IVec a, IVec b) { return _mm256_add_epi32(a, b); }
template <int S>
inline IVec shl16(IVec v) {
  return _mm256_slli_epi16(v, S);
}
template <int S>
inline IVec shr16(IVec v) {
  return _mm256_srli_epi16(v, S);
}
inline IVec dot4(IVec acc, IVec q, int32_t x4) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, q, _mm256_set1_epi32(x4));
#else
  const __m256i pairs = _mm256_maddubs_epi16(q, _mm256_set1_epi32(x4));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}
inline FVec fload(const float* p) { return _mm256_loadu_ps(p); }
inline FVec fwiden(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline FVec fzero() { return _mm256_setzero_ps(); }
inline FVec fset(float x) { return _mm256_set1_ps(x); }
inline FVec fint(IVec v) { return _mm256_cvtepi32_ps(v); }
inline FVec fmul(FVec a, FVec b) { return _mm256_mul_ps(a, b); }
inline FVec ffma(FVec a, FVec b, FVec c) { return _mm256_fmadd_ps(a, b, c); }
inline FVec ffnma(FVec a, FVec b, FVec c) { return _mm256_fnmadd_ps(a, b, c); }
inline void fstore_rows(float* y, FVec v, int64_t live) {
  if (live >= kRowsPerVec) return _mm256_storeu_ps(y, v);
  float all[kRowsPerVec];
  _mm256_storeu_ps(all, v);
  std::copy(all, all + live, y);
}
#endif

// Bits [4, 4 + kBits) of a chunk's quants from the high plane: chunk k of
// its group sits at bits [kBits * k, kBits * (k + 1)) of each byte.
template <int kBits, int kChunk>
inline IVec high_part(IVec h) {
  const IVec mask = ibytes(((1 << kBits) - 1) << 4);
  constexpr int at = kBits * kChunk;  // shifts in 16-bit lanes: the mask drops what crosses a byte
  if constexpr (at <= 4) return iand(shl16<4 - at>(h), mask);
  else return iand(shr16<at - 4>(h), mask);
}

// sum over the group of q * qx per row (int32 lanes): the group's chunk
// pairs from the low plane, with their high bits where the type has them.
template <int kBits, int kChunks, int... P>
inline IVec group_dot(const uint8_t* low, const uint8_t* high, const int8_t* xq, std::integer_sequence<int, P...>) {
  const IVec nibble = ibytes(0x0F);
  [[maybe_unused]] const IVec h = kBits ? iload(high) : izero();
  IVec s0 = izero(), s1 = izero();
  auto pair = [&]<int Pair>() {
    const IVec v = iload(low + 64 * Pair);
    IVec q0 = iand(v, nibble), q1 = iand(shr16<4>(v), nibble);
    if constexpr (kBits > 0) {
      q0 = ior(q0, high_part<kBits, 2 * Pair>(h));
      q1 = ior(q1, high_part<kBits, 2 * Pair + 1>(h));
    }
    int32_t a0, a1;
    std::memcpy(&a0, xq + 8 * Pair, 4);
    std::memcpy(&a1, xq + 8 * Pair + 4, 4);
    s0 = dot4(s0, q0, a0);
    s1 = dot4(s1, q1, a1);
  };
  (pair.template operator()<P>(), ...);
  static_assert(sizeof...(P) * 2 == kChunks);
  return iadd(s0, s1);
}

// y for T tokens and the rows [r0, r0 + kRowsPerVec) of row group g (r0 is
// 0 or, with AVX2, 8), `live` of them real. kBits: 0 (Q4_K), 1 (Q5_K) or 2
// (Q6_K, groups of 16).
template <int T, int kBits>
void tile(const KPacked& w, int64_t g, int64_t r0, const Q8KActivations* x, float* y, int64_t row_stride,
          int64_t live) {
  constexpr int64_t group = kBits == 2 ? 16 : 32, per_block = QK / group;
  constexpr int kChunks = int(group / 4);
  const int64_t blocks = w.blocks();
  FVec acc[T];
  for (int t = 0; t < T; ++t) acc[t] = fzero();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t gb = g * blocks + b;
    const FVec d = fload(w.d.data() + gb * kGroup + r0);
    [[maybe_unused]] const FVec dmin = fload(w.dmin.data() + gb * kGroup + r0);
    FVec blk[T];
    for (int t = 0; t < T; ++t) blk[t] = fzero();
    for (int64_t j = 0; j < per_block; ++j) {
      const uint8_t* low = w.low.data() + (gb * (QK / 8) + j * kChunks / 2) * 64 + r0 * 4;
      const uint8_t* high = kBits ? w.high.data() + (gb * per_block + j) * 64 + r0 * 4 : nullptr;
      // s = d * sc and o = dmin * m (Q6_K: 32 s), the products ggml forms.
      const FVec s = fmul(d, fwiden(w.sc.data() + (gb * per_block + j) * kGroup + r0));
      FVec o;
      if constexpr (kBits == 2) o = fmul(s, fset(32.0f));
      else o = fmul(dmin, fwiden(w.m.data() + (gb * per_block + j) * kGroup + r0));
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = x[t].q.data() + b * QK + j * group;
        const IVec dot = group_dot<kBits, kChunks>(low, high, xq, std::make_integer_sequence<int, kChunks / 2>());
        const float gsum = float(x[t].group_sum[size_t(b * per_block + j)]);
        blk[t] = ffma(fint(dot), s, blk[t]);
        blk[t] = ffnma(o, fset(gsum), blk[t]);
      }
    }
    for (int t = 0; t < T; ++t) acc[t] = ffma(blk[t], fset(x[t].d[size_t(b)]), acc[t]);
  }
  for (int t = 0; t < T; ++t) fstore_rows(y + int64_t(t) * row_stride + r0, acc[t], live);
}

template <int kBits>
void group_rows(const KPacked& w, int64_t g, const Q8KActivations* xs, int64_t n, float* y) {
  constexpr int64_t kTile = 4;
  float* yg = y + g * kGroup;
  for (int64_t r0 = 0; r0 < kGroup; r0 += kRowsPerVec) {
    const int64_t live = std::min(kRowsPerVec, w.rows - g * kGroup - r0);
    if (live <= 0) break;
    int64_t t = 0;
    for (; t + kTile <= n; t += kTile) tile<kTile, kBits>(w, g, r0, xs + t, yg + t * w.rows, w.rows, live);
    for (; t < n; ++t) tile<1, kBits>(w, g, r0, xs + t, yg + t * w.rows, w.rows, live);
  }
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
  fail("k_packed_matmul: this build has neither AVX512-VNNI nor AVX2 kernels (check KPacked::available())");
}
#endif

}  // namespace ggtrain::quant
