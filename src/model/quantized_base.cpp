#include "model/quantized_base.h"

#include <fmt/ranges.h>

#include "model/checkpoint.h"
#include "model/params.h"
#include "util/error.h"
#include "util/hash.h"

namespace ggtrain::model {

QuantizedBase::QuantizedBase(const gguf::GgufFile& f, const LlamaConfig& c) {
  const ParamLayout base(c.without_lora());
  for (const auto& t : base.tensors()) {
    const auto* ti = f.find_tensor(t.name);
    if (!ti || ti->type != gguf::TensorType::Q8_0 || t.shape.size() != 2) continue;
    if (ti->shape() != ggml_ne(t.shape))
      fail("{}: tensor '{}' has ne [{}], expected [{}]", f.path(), t.name, fmt::join(ti->shape(), ", "),
           fmt::join(ggml_ne(t.shape), ", "));
    const kernels::Q8Rows rows{ti->data, t.shape[0], t.shape[1]};
    if (t.shape[1] % int64_t(kernels::kQ8Block) != 0 || uint64_t(rows.rows * rows.row_bytes()) != ti->n_bytes)
      fail("{}: Q8_0 tensor '{}' holds {} bytes, not {} rows of {} blocks", f.path(), t.name, ti->n_bytes,
           rows.rows, t.shape[1] / int64_t(kernels::kQ8Block));
    rows_[t.name] = rows;
    names_.insert(t.name);
    bytes_ += int64_t(ti->n_bytes);
  }
}

const kernels::Q8Rows* QuantizedBase::find(const std::string& name) const {
  const auto it = rows_.find(name);
  return it == rows_.end() ? nullptr : &it->second;
}

void load_base_params(const gguf::GgufFile& f, const LlamaConfig& c, const ParamLayout& layout, float* params) {
  std::set<std::string> held;
  for (const auto& name : ParamLayout(c.without_lora()).names())
    if (!layout.find(name)) held.insert(name);
  // The base tensors come first in the layout, LoRA tensors after: the plain
  // model's layout without `held` has the model's offsets.
  load_llama_params(f, ParamLayout(c.without_lora(), held), params, held);
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
