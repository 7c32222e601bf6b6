#pragma once
// Attention of a few new queries against a KV cache: decode (one query per
// head) and prompts after a kept prefix. The training kernel's flash tiles
// suit a prompt into an empty cache; here there are too few queries for
// tiles, and what costs is reading the cache, so:
// - the query heads of a KV head's group are computed together, each key and
//   value read once per group from L1;
// - keys are stored transposed in tiles of 16 positions, so 16 scores are
//   16-lane FMAs of a key tile row against one broadcast query element (no
//   horizontal sums);
// - the cache may hold fp16 (llama.cpp's default: half the bytes to read);
// - one query's keys are split across threads when there are fewer (query,
//   KV head) pairs than threads, and the partial softmaxes merged.
//
// One layer's cache, elements E (float or fp16 bits), n_ctx a multiple of 16:
//   k : [n_kv_heads, n_ctx / 16, d_head, 16]   key j, element d at
//       ((g * n_ctx / 16 + j / 16) * d_head + d) * 16 + j % 16
//   v : [n_kv_heads, n_ctx, d_head]
#include <cstdint>

namespace ggtrain::kernels {

enum class CacheType { kF32, kF16 };

struct KvLayerView {
  CacheType type;
  const void* k;
  const void* v;
  int64_t n_ctx;  // positions the layer holds: cache_positions() of the context
};

constexpr int64_t kKeyTile = 16;  // key positions per transposed tile

// Positions a layer's cache holds for a context of n_ctx: whole tiles.
constexpr int64_t cache_positions(int64_t n_ctx) { return (n_ctx + kKeyTile - 1) / kKeyTile * kKeyTile; }

struct DecodeAttnShape {
  int64_t n_heads, n_kv_heads, d_head;
  // Sliding-window attention: a query at position p sees only keys
  // (p - window, p]. 0: every earlier key.
  int64_t window = 0;
  int64_t group() const { return n_heads / n_kv_heads; }
};

// Floats of scratch attention_decode needs for up to n_ctx positions on up
// to `threads` threads.
int64_t attention_decode_scratch(const DecodeAttnShape& s, int64_t n_ctx, int64_t threads);

// out[i] (n_heads * d_head) = causal attention of q[i] at position pos + i
// over the cache's positions [0, pos + i] (the last `window` of them with a
// window), for i < n; scale 1/sqrt(d_head).
// q, out: [n, n_heads * d_head]. Runs on up to `threads` threads (what the
// scratch was sized for).
void attention_decode(float* out, const float* q, const KvLayerView& cache, const DecodeAttnShape& s, int64_t pos,
                      int64_t n, float* scratch, int64_t threads);

// Writes n positions from `pos` of keys and values ([n, n_kv_heads * d_head]
// each) into a layer's cache (k, v as above, non-const), and rounds k and v
// in place to what the cache holds, so attention computed from them equals
// attention computed from the cache.
void store_kv(void* k_cache, void* v_cache, CacheType type, int64_t n_ctx, const DecodeAttnShape& s, float* k, float* v,
              int64_t pos, int64_t n);

}  // namespace ggtrain::kernels
