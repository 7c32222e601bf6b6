#pragma once
// Every layer's keys and values for n_ctx positions, in the layout
// kernels/attention_decode reads (keys in transposed tiles of 16 positions),
// as fp32 or fp16 (llama.cpp's default: half the memory, and half the bytes
// each decoded token reads), and the token ids they were computed from: the
// one record of what the cache holds, so a chat reuses exactly the prefix
// its next prompt shares with it.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention_decode.h"

namespace ggtrain::infer {

class KvCache {
 public:
  KvCache(kernels::CacheType type, int64_t n_layers, int64_t n_ctx, const kernels::DecodeAttnShape& shape);
  // Keys and values for the layers marked in `attends` only (a hybrid
  // model's convolution layers keep none); the others' layer() and store()
  // must not be called.
  KvCache(kernels::CacheType type, const std::vector<bool>& attends, int64_t n_ctx,
          const kernels::DecodeAttnShape& shape);
  kernels::CacheType type() const { return type_; }
  kernels::KvLayerView layer(int64_t l) const;
  // Stores k, v ([n, n_kv_heads * d_head]) at positions pos.. of layer l,
  // rounding them in place to the cache's precision.
  void store(int64_t l, float* k, float* v, int64_t pos, int64_t n);

  // The ids at positions 0..size()-1, whose keys and values every layer holds.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t size() const { return int64_t(tokens_.size()); }
  // Records ids stored at positions size().. (after every layer's store()).
  void append(const int32_t* ids, int64_t n) { tokens_.insert(tokens_.end(), ids, ids + n); }
  // Holds src's first n positions (keys, values, ids) and nothing after:
  // src must have this cache's type, layers and shape.
  void copy_prefix(const KvCache& src, int64_t n);
  // Forgets every position from n on.
  void truncate(int64_t n) {
    if (n >= 0 && n < size()) tokens_.resize(size_t(n));
  }

 private:
  kernels::CacheType type_;
  kernels::DecodeAttnShape shape_;
  int64_t n_ctx_;  // kernels::cache_positions of the context
  int64_t layer_bytes_;  // of keys (and of values) per layer
  std::vector<int64_t> slot_;  // per model layer: its index in k_ and v_, -1 without a cache
  int64_t offset(int64_t l) const;
  std::vector<uint8_t> k_, v_;
  std::vector<int32_t> tokens_;
};

// "f32" or "f16" (llama.cpp's --cache-type-k names); anything else fails
// naming the value.
kernels::CacheType cache_type_from_name(const std::string& name);

}  // namespace ggtrain::infer
