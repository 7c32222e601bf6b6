#include "model/checkpoint.h"

#include <algorithm>

#include "model/metadata_keys.h"
#include "quant/gguf_floats.h"
#include "util/error.h"

namespace ggtrain::model {

using gguf::TensorType;
using gguf::Value;

std::vector<uint64_t> ggml_ne(const std::vector<int64_t>& shape) {
  std::vector<uint64_t> ne(shape.rbegin(), shape.rend());
  return ne;
}

void add_model_tensors(gguf::GgufWriter& w, const Config& c, const ParamLayout& layout, const float* params,
                       TensorType type) {
  w.set("general.architecture", Value::str(c.arch));
  add_metadata_keys(w, c);
  // llama_ftype: 0 = all F32, 1 = mostly F16, 7 = mostly Q8_0, 32 = mostly BF16
  uint32_t ftype = type == TensorType::F16 ? 1 : type == TensorType::Q8_0 ? 7 : type == TensorType::BF16 ? 32 : 0;
  w.set("general.file_type", Value::u32(ftype));
  // First, where llama.cpp's converter puts it (an extra tensor, before the model's).
  if (!c.rope_freq_factors.empty())
    quant::add_float_tensor(w, kRopeFreqsTensor, TensorType::F32, {uint64_t(c.rope_freq_factors.size())},
                            c.rope_freq_factors.data());
  for (const auto& t : layout.tensors()) {
    // Vectors, LFM2's and Qwen3.5's convolution kernels and the experts'
    // routers stay F32 as the converter writes them.
    const bool f32_matrix = t.name.ends_with(std::string(kShortConvKernel) + ".weight") ||
                            t.name.ends_with(".ssm_conv1d.weight") || t.name.ends_with(".ffn_gate_inp.weight");
    TensorType tt = t.shape.size() == 1 || f32_matrix ? TensorType::F32 : type;
    if (tt == TensorType::Q8_0 && t.shape.back() % 32 != 0) tt = TensorType::F16;
    quant::add_float_tensor(w, t.name, tt, ggml_ne(t.shape), params + t.offset);
  }
  // Last, where the converter puts them; `c` outlives the write.
  if (c.nextn_tensors)
    for (const auto& t : *c.nextn_tensors) w.add_tensor_raw(t.name, t.type, t.ne, t.bytes.data());
}

const gguf::TensorInfo& tensor_of_shape(const gguf::GgufFile& f, const ParamTensor& t) {
  const auto& ti = f.tensor(t.name);
  if (ti.shape() != ggml_ne(t.shape))
    fail("{}: tensor '{}' has ne [{}], expected [{}]", f.path(), t.name, fmt::join(ti.shape(), ", "),
         fmt::join(ggml_ne(t.shape), ", "));
  return ti;
}

void load_model_params(const gguf::GgufFile& f, const ParamLayout& layout, float* params,
                       const std::set<std::string>& held_elsewhere) {
  for (const auto& ti : f.tensors())
    if (!layout.find(ti.name) && !layout.carries(ti.name) && !held_elsewhere.count(ti.name) &&
        ti.name != kRopeFreqsTensor)
      fail("{}: unexpected tensor '{}' for this llama configuration", f.path(), ti.name);
  for (const auto& t : layout.tensors()) {
    auto v = quant::tensor_floats(f, tensor_of_shape(f, t));
    std::copy(v.begin(), v.end(), params + t.offset);
  }
}

}  // namespace ggtrain::model
