#include "kernels/attention_decode.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#define GGTRAIN_ATTN_VECTOR 1
#include <immintrin.h>
// GCC 12 warns about the undefined source operand inside its own AVX-512
// intrinsics (a known false positive; see kernels/vexp.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/number_formats.h"
#include "kernels/parallel.h"
#include "kernels/vexp.h"
#include "util/error.h"

namespace ggtrain::kernels {

namespace {

constexpr int64_t kMinChunkTiles = 4;  // a thread's share of one query's keys: 64 keys at least

inline float to_float(float x) { return x; }
inline float to_float(uint16_t h) { return fp16_to_fp32(h); }

// One vector of floats: 16 with AVX-512, 8 with AVX2 (whose F16C widens
// fp16 cache entries in the load). Both levels sum a key's score in the
// same order, so they give the same scores.
#if defined(__AVX512F__)
using Vec = __m512;
constexpr int64_t kWidth = 16;
constexpr int kValueBlock = 16;  // accumulators of o held in registers (of 32)
inline Vec vzero() { return _mm512_setzero_ps(); }
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec vload(const float* p) { return _mm512_loadu_ps(p); }
inline Vec vload(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline void vstore(float* p, Vec x) { _mm512_storeu_ps(p, x); }
// x[0, kWidth) rounded to fp16: the bits into h, their values back into x.
inline void vround_fp16(float* x, uint16_t* h) {
  const __m256i b = _mm512_cvtps_ph(_mm512_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(h), b);
  _mm512_storeu_ps(x, _mm512_cvtph_ps(b));
}
#elif defined(GGTRAIN_ATTN_VECTOR)
using Vec = __m256;
constexpr int64_t kWidth = 8;
constexpr int kValueBlock = 8;  // of 16 registers
inline Vec vzero() { return _mm256_setzero_ps(); }
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec vload(const float* p) { return _mm256_loadu_ps(p); }
inline Vec vload(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline void vstore(float* p, Vec x) { _mm256_storeu_ps(p, x); }
inline void vround_fp16(float* x, uint16_t* h) {
  const __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h), b);
  _mm256_storeu_ps(x, _mm256_cvtph_ps(b));
}
#endif
#if defined(GGTRAIN_ATTN_VECTOR)
static_assert(kKeyTile % kWidth == 0, "a key tile's scores fill whole vectors");
#endif

// s[r * ld + j - j0] = qs[r] . key j for the G queries qs [G, hd] (already
// scaled) and keys [j0, j1) of one KV head's transposed tiles `k`; j0 is a
// multiple of 16, the tail of the last tile is computed and not used.
template <typename E>
void key_scores(float* s, int64_t ld, const float* qs, int64_t G, const E* k, int64_t hd, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; j += kKeyTile) {
    const E* tile = k + (j / kKeyTile) * hd * kKeyTile;
    for (int64_t r = 0; r < G; ++r) {
      const float* qr = qs + r * hd;
      float* out = s + r * ld + (j - j0);
#if defined(GGTRAIN_ATTN_VECTOR)
      // Four chains over d (an FMA's latency is four of its issue slots),
      // each as many vectors as a tile's 16 keys need.
      constexpr int64_t kLanes = kKeyTile / kWidth;
      Vec acc[4][kLanes];
      for (auto& chain : acc)
        for (auto& a : chain) a = vzero();
      int64_t d = 0;
      for (; d + 4 <= hd; d += 4)
        for (int64_t c = 0; c < 4; ++c) {
          const Vec qd = vset(qr[d + c]);
          for (int64_t l = 0; l < kLanes; ++l)
            acc[c][l] = vfma(qd, vload(tile + (d + c) * kKeyTile + l * kWidth), acc[c][l]);
        }
      for (; d < hd; ++d)
        for (int64_t l = 0; l < kLanes; ++l)
          acc[0][l] = vfma(vset(qr[d]), vload(tile + d * kKeyTile + l * kWidth), acc[0][l]);
      for (int64_t l = 0; l < kLanes; ++l)
        vstore(out + l * kWidth, vadd(vadd(acc[0][l], acc[1][l]), vadd(acc[2][l], acc[3][l])));
#else
      float acc[kKeyTile] = {};
      for (int64_t d = 0; d < hd; ++d)
        for (int64_t lane = 0; lane < kKeyTile; ++lane) acc[lane] += qr[d] * to_float(tile[d * kKeyTile + lane]);
      std::copy(acc, acc + kKeyTile, out);
#endif
    }
  }
}

#if defined(GGTRAIN_ATTN_VECTOR)
// o[0, N * kWidth) = sum over keys [j0, j1) of w[j - j0] * v_j[0, N * kWidth)
// (v: one KV head's rows, hd apart), the N accumulators in registers.
template <typename E, int N>
void weighted_values_block(float* o, const float* w, const E* v, int64_t hd, int64_t j0, int64_t j1) {
  Vec acc[N];
  for (int c = 0; c < N; ++c) acc[c] = vzero();
  for (int64_t j = j0; j < j1; ++j) {
    const Vec wj = vset(w[j - j0]);
    const E* vj = v + j * hd;
    for (int c = 0; c < N; ++c) acc[c] = vfma(wj, vload(vj + c * kWidth), acc[c]);
  }
  for (int c = 0; c < N; ++c) vstore(o + c * kWidth, acc[c]);
}

template <typename E, size_t... N>
constexpr auto value_blocks(std::index_sequence<N...>) {
  return std::array{&weighted_values_block<E, int(N) + 1>...};
}
#endif

// o[hd] = sum over keys [j0, j1) of w[j - j0] * v_j (v: one KV head's rows).
template <typename E>
void weighted_values(float* o, const float* w, const E* v, int64_t hd, int64_t j0, int64_t j1) {
#if defined(GGTRAIN_ATTN_VECTOR)
  if (hd % kWidth == 0) {  // in blocks of up to kValueBlock vectors (gemma3's 256: one AVX-512 pass)
    static constexpr auto blocks = value_blocks<E>(std::make_index_sequence<kValueBlock>());
    for (int64_t d0 = 0; d0 < hd; d0 += kValueBlock * kWidth) {
      const int64_t vectors = std::min<int64_t>(kValueBlock, (hd - d0) / kWidth);
      blocks[size_t(vectors - 1)](o + d0, w, v + d0, hd, j0, j1);
    }
    return;
  }
#endif
  std::fill(o, o + hd, 0.0f);
  for (int64_t j = j0; j < j1; ++j) {
    const float wj = w[j - j0];
    const E* vj = v + j * hd;
    for (int64_t d = 0; d < hd; ++d) o[d] += wj * to_float(vj[d]);
  }
}

// One query's softmax over some of its keys, not yet normalised: per query
// head of the group, o = sum_j exp(s_j - m) v_j, l = sum_j exp(s_j - m).
struct Partial {
  float* o;  // [G, hd], rows o_stride apart
  int64_t o_stride;
  float* m;  // [G], ml_stride apart
  float* l;
  int64_t ml_stride;
};

// Keys before `first` (a sliding window's start, inside the first tile)
// are scored and then masked out; at least one key of [j0, j1) is visible.
template <typename E>
void attend_keys(const Partial& p, const float* q, int64_t G, const E* k, const E* v, int64_t hd, int64_t j0,
                 int64_t j1, int64_t first, float* qs, float* s, int64_t ld) {
  const float scale = 1.0f / std::sqrt(float(hd));
  for (int64_t i = 0; i < G * hd; ++i) qs[i] = q[i] * scale;
  key_scores(s, ld, qs, G, k, hd, j0, j1);
  for (int64_t r = 0; r < G; ++r) {
    float* sr = s + r * ld;
    for (int64_t j = j0; j < first; ++j) sr[j - j0] = -INFINITY;
    float m = -INFINITY;
    for (int64_t j = 0; j < j1 - j0; ++j) m = std::max(m, sr[j]);
    p.m[r * p.ml_stride] = m;
    p.l[r * p.ml_stride] = exp_shift_sum(sr, j1 - j0, m);
    weighted_values(p.o + r * p.o_stride, sr, v, hd, j0, j1);
  }
}

// How many parts one query's keys are split into, when the work is spread
// over threads: enough (query, KV head, part) items for every thread twice
// over when a single query is decoded, each part at least kMinChunkTiles
// tiles.
int64_t key_parts(const DecodeAttnShape& s, int64_t pos, int64_t n, int64_t threads) {
  if (n != 1) return 1;
  const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos + 1 - s.window) : 0;
  const int64_t tiles = pos / kKeyTile + 1 - first / kKeyTile;
  const int64_t want = (2 * threads + s.n_kv_heads - 1) / s.n_kv_heads;
  return std::max<int64_t>(1, std::min(want, tiles / kMinChunkTiles));
}

int64_t max_key_parts(int64_t threads) { return std::max<int64_t>(1, 2 * threads); }

// A thread's queries [G, hd] and scores [G, the cache's positions].
int64_t per_thread_scratch(const DecodeAttnShape& s, int64_t n_ctx) {
  return s.group() * (s.d_head + cache_positions(n_ctx));
}

template <typename E>
void attention_decode_typed(float* out, const float* q, const E* kc, const E* vc, int64_t n_ctx,
                            const DecodeAttnShape& s, int64_t pos, int64_t n, float* scratch, int64_t threads) {
  const int64_t hd = s.d_head, G = s.group(), QD = s.n_heads * hd, KVH = s.n_kv_heads;
  const bool parallel = threads > 1 && s.n_heads * n * (pos + n) * hd >= kMinParallelWork;
  const int64_t parts = parallel ? key_parts(s, pos, n, threads) : 1, items = n * KVH * parts;
  const int64_t per_thread = per_thread_scratch(s, n_ctx);
  // Split parts: [n_heads, parts] of (o[hd], m, l) after the threads' scratch.
  float* part_o = scratch + threads * per_thread;
  float* part_m = part_o + s.n_heads * parts * hd;
  float* part_l = part_m + s.n_heads * parts;
#pragma omp parallel num_threads(int(threads)) if (parallel)
  {
    float* qs = scratch + omp_get_thread_num() * per_thread;
    float* sc = qs + G * hd;
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t i = it / (KVH * parts), g = (it / parts) % KVH, c = it % parts;
      // Keys [first, keys) are visible, in tiles [t0, t0 + tiles).
      const int64_t keys = pos + i + 1, first = s.window > 0 ? std::max<int64_t>(0, keys - s.window) : 0;
      const int64_t t0 = first / kKeyTile, tiles = (keys + kKeyTile - 1) / kKeyTile - t0;
      const int64_t j0 = std::min(keys, (t0 + c * tiles / parts) * kKeyTile);
      const int64_t j1 = std::min(keys, (t0 + (c + 1) * tiles / parts) * kKeyTile);
      const float* qg = q + i * QD + g * G * hd;
      const E* k = kc + g * (n_ctx / kKeyTile) * hd * kKeyTile;
      const E* v = vc + g * n_ctx * hd;
      if (parts == 1) {
        float m[64], l[64];  // G <= 64: checked by attention_decode
        float* o = out + i * QD + g * G * hd;
        attend_keys<E>({o, hd, m, l, 1}, qg, G, k, v, hd, j0, j1, first, qs, sc, n_ctx);
        for (int64_t r = 0; r < G; ++r)
          for (int64_t d = 0; d < hd; ++d) o[r * hd + d] /= l[r];
      } else {  // every part holds at least kMinChunkTiles tiles (key_parts)
        const int64_t h0 = g * G;
        attend_keys<E>(
            {part_o + (h0 * parts + c) * hd, parts * hd, part_m + h0 * parts + c, part_l + h0 * parts + c, parts}, qg,
            G, k, v, hd, j0, j1, first, qs, sc, n_ctx);
      }
    }
    if (parts > 1) {
      // The parts of each head: rescaled to their common maximum and added.
#pragma omp for schedule(static)
      for (int64_t h = 0; h < s.n_heads; ++h) {
        const float* mh = part_m + h * parts;
        const float* lh = part_l + h * parts;
        const float m = *std::max_element(mh, mh + parts);
        float l = 0;
        for (int64_t c = 0; c < parts; ++c) l += lh[c] * std::exp(mh[c] - m);
        float* o = out + h * hd;
        std::fill(o, o + hd, 0.0f);
        for (int64_t c = 0; c < parts; ++c) {
          const float w = std::exp(mh[c] - m) / l;
          const float* oc = part_o + (h * parts + c) * hd;
          for (int64_t d = 0; d < hd; ++d) o[d] += w * oc[d];
        }
      }
    }
  }
}

// Rounds n floats to fp16 in place; their bits into h.
void round_to_fp16(float* x, uint16_t* h, int64_t n) {
  int64_t i = 0;
#if defined(GGTRAIN_ATTN_VECTOR)
  for (; i + kWidth <= n; i += kWidth) vround_fp16(x + i, h + i);
#endif
  for (; i < n; ++i) h[i] = fp32_to_fp16(x[i]), x[i] = fp16_to_fp32(h[i]);
}

template <typename E>
void store_kv_typed(E* kc, E* vc, int64_t n_ctx, const DecodeAttnShape& s, float* k, float* v, int64_t pos, int64_t n) {
  const int64_t hd = s.d_head, KD = s.n_kv_heads * hd;
  // A key row's fp16 bits before their transposed write (fp16 caches only).
  std::vector<uint16_t> hk(std::is_same_v<E, uint16_t> ? static_cast<size_t>(hd) : 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos + i;
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      float* kr = k + i * KD + g * hd;
      float* vr = v + i * KD + g * hd;
      E* kt = kc + ((g * (n_ctx / kKeyTile) + p / kKeyTile) * hd) * kKeyTile + p % kKeyTile;
      E* vt = vc + (g * n_ctx + p) * hd;
      if constexpr (std::is_same_v<E, uint16_t>) {
        round_to_fp16(kr, hk.data(), hd);
        round_to_fp16(vr, vt, hd);
        for (int64_t d = 0; d < hd; ++d) kt[d * kKeyTile] = hk[size_t(d)];
      } else {
        for (int64_t d = 0; d < hd; ++d) kt[d * kKeyTile] = kr[d];
        std::copy(vr, vr + hd, vt);
      }
    }
  }
}

}  // namespace

int64_t attention_decode_scratch(const DecodeAttnShape& s, int64_t n_ctx, int64_t threads) {
  return threads * per_thread_scratch(s, n_ctx) + s.n_heads * max_key_parts(threads) * (s.d_head + 2);
}

void attention_decode(float* out, const float* q, const KvLayerView& c, const DecodeAttnShape& s, int64_t pos,
                      int64_t n, float* scratch, int64_t threads) {
  if (s.group() > 64) fail("attention: {} query heads per KV head (at most 64)", s.group());
  if (pos < 0 || n < 1 || pos + n > c.n_ctx)
    fail("attention: positions {}..{} outside a cache of {}", pos, pos + n, c.n_ctx);
  if (c.type == CacheType::kF16)
    attention_decode_typed(out, q, static_cast<const uint16_t*>(c.k), static_cast<const uint16_t*>(c.v), c.n_ctx, s,
                           pos, n, scratch, threads);
  else
    attention_decode_typed(out, q, static_cast<const float*>(c.k), static_cast<const float*>(c.v), c.n_ctx, s, pos, n,
                           scratch, threads);
}

void store_kv(void* k_cache, void* v_cache, CacheType type, int64_t n_ctx, const DecodeAttnShape& s, float* k, float* v,
              int64_t pos, int64_t n) {
  if (type == CacheType::kF16)
    store_kv_typed(static_cast<uint16_t*>(k_cache), static_cast<uint16_t*>(v_cache), n_ctx, s, k, v, pos, n);
  else store_kv_typed(static_cast<float*>(k_cache), static_cast<float*>(v_cache), n_ctx, s, k, v, pos, n);
}

}  // namespace ggtrain::kernels
