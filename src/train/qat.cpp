#include "train/qat.h"

#include <algorithm>
#include <cstring>

#include "quant/type_traits.h"
#include "util/clock.h"

namespace ggtrain::train {

namespace {

// ggml's ne: the row-major shape reversed.
std::vector<uint64_t> ggml_ne(const std::vector<int64_t>& shape) {
  std::vector<uint64_t> ne(shape.rbegin(), shape.rend());
  return ne;
}

}  // namespace

QatWeights::QatWeights(quant::FileType ft, const model::Config& c, const model::ParamLayout& layout) {
  std::vector<const model::ParamTensor*> order;
  std::vector<quant::TensorShape> shapes;
  for (const auto& t : layout.tensors()) {
    order.push_back(&t);
    shapes.push_back({t.name, ggml_ne(t.shape)});
  }
  // The export counts the multi-token-prediction blocks' tensors and layers too.
  if (c.nextn_tensors)
    for (const auto& t : *c.nextn_tensors) shapes.push_back({t.name, t.ne});
  // the recipe counts attn_v and ffn_down tensors in llama.cpp's order
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return quant::llama_cpp_tensor_before(a->name, b->name); });
  quant::TypeRecipe recipe(ft, shapes, int(c.n_layers + c.n_nextn), int(c.n_experts));
  int64_t total = 0;
  for (const auto* t : order) {
    const auto ne = ggml_ne(t->shape);
    const gguf::TensorType type = recipe.next({t->name, ne}, gguf::TensorType::F32);
    if (type == gguf::TensorType::F32) continue;
    const int64_t cols = int64_t(ne[0]);
    tensors_.push_back({t->offset, t->size / cols, cols, type});
    total += t->size;
  }
  masters_.resize(size_t(total));
}

void QatWeights::quantize(float* params) {
  if (active_) return;
  active_ = true;
  const double t0 = now_seconds();
  int64_t at = 0;
  for (const Tensor& t : tensors_) {
    float* w = params + t.offset;
    std::memcpy(masters_.data() + at, w, size_t(t.rows * t.cols) * sizeof(float));
    at += t.rows * t.cols;
    const quant::TypeCodec& c = quant::codec(t.type, "quantize to");
    const size_t row_bytes = gguf::storage_bytes(t.type, size_t(t.cols));
    // rows are independent: each thread quantizes and dequantizes its own
#pragma omp parallel
    {
      std::vector<uint8_t> bytes(row_bytes);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < t.rows; ++r) {
        c.from_float(w + r * t.cols, bytes.data(), size_t(t.cols));
        c.to_float(bytes.data(), w + r * t.cols, size_t(t.cols));
      }
    }
  }
  last_seconds_ = now_seconds() - t0;
}

void QatWeights::restore(float* params) {
  if (!active_) return;
  active_ = false;
  int64_t at = 0;
  for (const Tensor& t : tensors_) {
    std::memcpy(params + t.offset, masters_.data() + at, size_t(t.rows * t.cols) * sizeof(float));
    at += t.rows * t.cols;
  }
}

}  // namespace ggtrain::train
