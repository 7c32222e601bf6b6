#include "model/quantized_base.h"

#include <fmt/ranges.h>

#include "model/checkpoint.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "util/error.h"
#include "util/hash.h"

namespace ggtrain::model {

namespace {

// The decoder of a type the base may hold as it is; null for the others
// (F32, F16, BF16: those become float parameters).
quant::DecodeFn held_decoder(gguf::TensorType t) {
  const quant::TypeCodec* c = quant::find_codec(t);
  return c && c->held_base ? c->to_float : nullptr;
}

bool is_float_type(gguf::TensorType t) {
  return t == gguf::TensorType::F32 || t == gguf::TensorType::F16 || t == gguf::TensorType::BF16;
}

}  // namespace

void QuantizedBase::hold(const std::string& name, gguf::TensorType type, const kernels::QuantRows& rows,
                         int64_t bytes) {
  held_[name] = {type, rows};
  names_.insert(name);
  bytes_ += bytes;
}

void QuantizedBase::hold_in_bf16(const gguf::GgufFile& f, const ParamTensor& t, const gguf::TensorInfo& ti) {
  const int64_t cols = t.shape.back(), rows = t.size / cols;
  const quant::DecodeFn to_float = quant::codec(gguf::TensorType::BF16, "hold").to_float;
  if (ti.type == gguf::TensorType::BF16) {  // as the file has it
    return hold(t.name, ti.type, {ti.data, rows, cols, cols * 2, to_float, true}, int64_t(ti.n_bytes));
  }
  auto rounded = std::make_shared<std::vector<kernels::bf16>>(size_t(t.size));
  const std::vector<float> floats = quant::tensor_floats(f, ti);
  kernels::to_bf16(rounded->data(), floats.data(), t.size);
  rounded_.push_back(rounded);
  hold(t.name, gguf::TensorType::BF16,
       {reinterpret_cast<const uint8_t*>(rounded->data()), rows, cols, cols * 2, to_float, true}, t.size * 2);
}

QuantizedBase::QuantizedBase(const gguf::GgufFile& f, const Config& c, bool floats_in_bf16) {
  const ParamLayout base(c.without_lora());
  for (const auto& t : base.tensors()) {
    const auto* ti = f.find_tensor(t.name);
    // A float matrix of the model's shape; one a grown vocabulary reshapes
    // stays a float parameter.
    if (floats_in_bf16 && ti && is_float_type(ti->type) && t.shape.size() >= 2 && ti->shape() == ggml_ne(t.shape)) {
      hold_in_bf16(f, t, *ti);
      continue;
    }
    const quant::DecodeFn decode = ti ? held_decoder(ti->type) : nullptr;
    if (!decode || t.shape.size() < 2) continue;
    if (ti->shape() != ggml_ne(t.shape))
      fail("{}: tensor '{}' has ne [{}], expected [{}]", f.path(), t.name, fmt::join(ti->shape(), ", "),
           fmt::join(ggml_ne(t.shape), ", "));
    const auto& tt = gguf::traits(ti->type);
    // [out, in], or [experts, out, in]: rows of `in` weights either way
    const int64_t cols = t.shape.back(), rows = t.size / cols;
    const int64_t block = int64_t(tt.block_size), row_bytes = cols / block * int64_t(tt.type_size);
    if (cols % block != 0 || uint64_t(rows * row_bytes) != ti->n_bytes)
      fail("{}: {} tensor '{}' holds {} bytes, not {} rows of {} blocks", f.path(), gguf::type_name(ti->type), t.name,
           ti->n_bytes, rows, cols / block);
    hold(t.name, ti->type, {ti->data, rows, cols, row_bytes, decode}, int64_t(ti->n_bytes));
  }
}

const HeldMatrix* QuantizedBase::find(const std::string& name) const {
  const auto it = held_.find(name);
  return it == held_.end() ? nullptr : &it->second;
}

void load_base_params(const gguf::GgufFile& f, const Config& c, const ParamLayout& layout, float* params) {
  std::set<std::string> held;
  for (const auto& name : ParamLayout(c.without_lora()).names())
    if (!layout.find(name)) held.insert(name);
  // The base tensors come first in the layout, LoRA tensors after: the plain
  // model's layout without `held` has the model's offsets.
  load_model_params(f, ParamLayout(c.without_lora(), held), params, held);
}

uint64_t base_fingerprint(const gguf::GgufFile& f) {
  uint64_t h = fnv1a(nullptr, 0);
  for (const auto& t : f.tensors()) {
    h = fnv1a(t.name.data(), t.name.size(), h);
    const auto type = uint32_t(t.type);
    h = fnv1a(&type, sizeof(type), h);
    h = fnv1a(t.data, size_t(t.n_bytes), h);
  }
  return h;
}

}  // namespace ggtrain::model
