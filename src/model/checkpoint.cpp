#include "model/checkpoint.h"

#include <algorithm>

#include "util/error.h"

namespace ggtrain::model {

using gguf::TensorType;
using gguf::Value;

std::vector<uint64_t> ggml_ne(const std::vector<int64_t>& shape) {
  std::vector<uint64_t> ne(shape.rbegin(), shape.rend());
  return ne;
}

void add_llama_model(gguf::GgufWriter& w, const LlamaConfig& c, const ParamLayout& layout,
                     const float* params, TensorType type) {
  w.set("general.architecture", Value::str("llama"));
  w.set("llama.vocab_size", Value::u32(uint32_t(c.vocab)));
  w.set("llama.context_length", Value::u32(uint32_t(c.ctx)));
  w.set("llama.embedding_length", Value::u32(uint32_t(c.d_model)));
  w.set("llama.block_count", Value::u32(uint32_t(c.n_layers)));
  w.set("llama.feed_forward_length", Value::u32(uint32_t(c.d_ff)));
  w.set("llama.attention.head_count", Value::u32(uint32_t(c.n_heads)));
  w.set("llama.attention.head_count_kv", Value::u32(uint32_t(c.n_kv_heads)));
  w.set("llama.rope.dimension_count", Value::u32(uint32_t(c.d_head())));
  w.set("llama.rope.freq_base", Value::f32(float(c.rope_freq_base)));
  w.set("llama.attention.layer_norm_rms_epsilon", Value::f32(float(c.rms_eps)));
  // llama_ftype: 0 = all F32, 1 = mostly F16, 7 = mostly Q8_0, 32 = mostly BF16
  uint32_t ftype = type == TensorType::F16 ? 1 : type == TensorType::Q8_0 ? 7
                 : type == TensorType::BF16 ? 32 : 0;
  w.set("general.file_type", Value::u32(ftype));
  // First, where llama.cpp's converter puts it (an extra tensor, before the model's).
  if (!c.rope_freq_factors.empty())
    w.add_tensor_f32(kRopeFreqsTensor, TensorType::F32, {uint64_t(c.rope_freq_factors.size())},
                     c.rope_freq_factors.data());
  for (const auto& t : layout.tensors()) {
    TensorType tt = t.shape.size() == 1 ? TensorType::F32 : type;
    if (tt == TensorType::Q8_0 && t.shape.back() % 32 != 0) tt = TensorType::F16;
    w.add_tensor_f32(t.name, tt, ggml_ne(t.shape), params + t.offset);
  }
}

void load_llama_params(const gguf::GgufFile& f, const ParamLayout& layout, float* params,
                       const std::set<std::string>& held_elsewhere) {
  for (const auto& ti : f.tensors())
    if (!layout.find(ti.name) && !held_elsewhere.count(ti.name) && ti.name != kRopeFreqsTensor)
      fail("{}: unexpected tensor '{}' for this llama configuration", f.path(), ti.name);
  for (const auto& t : layout.tensors()) {
    const auto& ti = f.tensor(t.name);
    if (ti.shape() != ggml_ne(t.shape)) {
      auto ne = ggml_ne(t.shape);
      fail("{}: tensor '{}' has ne [{}], expected [{}]", f.path(), t.name,
           fmt::join(ti.shape(), ", "), fmt::join(ne, ", "));
    }
    auto v = f.to_float(ti);
    std::copy(v.begin(), v.end(), params + t.offset);
  }
}

}  // namespace ggtrain::model
