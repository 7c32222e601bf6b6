#include "infer/kv_cache.h"

#include <algorithm>

#include "util/error.h"

namespace ggtrain::infer {

KvCache::KvCache(kernels::CacheType type, int64_t n_layers, int64_t n_ctx, const kernels::DecodeAttnShape& shape)
    : KvCache(type, std::vector<bool>(size_t(n_layers), true), n_ctx, shape) {}

KvCache::KvCache(kernels::CacheType type, const std::vector<bool>& attends, int64_t n_ctx,
                 const kernels::DecodeAttnShape& shape)
    : type_(type), shape_(shape), n_ctx_(kernels::cache_positions(n_ctx)) {
  const int64_t element = type == kernels::CacheType::kF16 ? 2 : 4;
  layer_bytes_ = n_ctx_ * shape.n_kv_heads * shape.d_head * element;
  int64_t n = 0;
  for (bool a : attends) slot_.push_back(a ? n++ : -1);
  k_.assign(size_t(n * layer_bytes_), 0);
  v_.assign(k_.size(), 0);
}

int64_t KvCache::offset(int64_t l) const {
  if (l < 0 || l >= int64_t(slot_.size()) || slot_[size_t(l)] < 0) fail("KV cache: layer {} keeps no keys", l);
  return slot_[size_t(l)] * layer_bytes_;
}

kernels::KvLayerView KvCache::layer(int64_t l) const {
  return {type_, k_.data() + offset(l), v_.data() + offset(l), n_ctx_};
}

void KvCache::store(int64_t l, float* k, float* v, int64_t pos, int64_t n) {
  kernels::store_kv(k_.data() + offset(l), v_.data() + offset(l), type_, n_ctx_, shape_, k, v, pos, n);
}

// Per layer and KV head, the key tiles holding positions [0, n) and the
// value rows [0, n) are contiguous (kernels/attention_decode.h's layout).
void KvCache::copy_prefix(const KvCache& src, int64_t n) {
  if (src.type_ != type_ || src.slot_ != slot_ || src.n_ctx_ != n_ctx_ || src.layer_bytes_ != layer_bytes_)
    fail("KV cache: copying a cache of another shape");
  if (n < 0 || n > src.size()) fail("KV cache: copying {} of {} positions", n, src.size());
  const int64_t element = type_ == kernels::CacheType::kF16 ? 2 : 4;
  const int64_t hd = shape_.d_head, head_bytes = n_ctx_ * hd * element;
  const int64_t key_bytes = (n + kernels::kKeyTile - 1) / kernels::kKeyTile * kernels::kKeyTile * hd * element;
  for (int64_t at = 0; at < int64_t(k_.size()); at += head_bytes) {  // every layer's every KV head
    std::copy_n(src.k_.begin() + at, key_bytes, k_.begin() + at);
    std::copy_n(src.v_.begin() + at, n * hd * element, v_.begin() + at);
  }
  tokens_.assign(src.tokens_.begin(), src.tokens_.begin() + n);
}

kernels::CacheType cache_type_from_name(const std::string& name) {
  if (name == "f32") return kernels::CacheType::kF32;
  if (name == "f16") return kernels::CacheType::kF16;
  fail("--cache-type: '{}' is not a KV cache type (f16 or f32)", name);
}

}  // namespace ggtrain::infer
