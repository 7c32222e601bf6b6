#include "train/qat.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "model/checkpoint.h"
#include "model/lora.h"
#include "quant/type_traits.h"
#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

// What the saved rounding errors were made with (state file keys).
constexpr const char* kTypeKey = "ggtrain.qat.type";
constexpr const char* kImatrixKey = "ggtrain.qat.imatrix";

}  // namespace

QatWeights::QatWeights(quant::FileType ft, const model::Config& c, const model::ParamLayout& layout,
                       const convert::ImatrixInput* imatrix, int64_t every)
    : config_(c),
      layout_(layout),
      type_(quant::file_type_name(ft)),
      imatrix_(imatrix ? imatrix->path : ""),
      every_(every) {
  if (every < 1) fail("config: train.qat_every must be at least 1, got {}", every);
  // The recipe sees the model's own tensors, those a LoRA run holds outside
  // its buffer included, as the export of the merged model will.
  const model::ParamLayout model_layout(c.without_lora());
  std::vector<const model::ParamTensor*> order;
  std::vector<quant::TensorShape> shapes;
  for (const auto& t : model_layout.tensors()) {
    order.push_back(&t);
    shapes.push_back({t.name, model::ggml_ne(t.shape)});
  }
  // The export counts the multi-token-prediction blocks' tensors and layers too.
  if (c.nextn_tensors)
    for (const auto& t : *c.nextn_tensors) shapes.push_back({t.name, t.ne});
  // the recipe counts attn_v and ffn_down tensors in llama.cpp's order
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return quant::llama_cpp_tensor_before(a->name, b->name); });
  quant::TypeRecipe recipe(ft, shapes, int(c.n_layers + c.n_nextn), int(c.n_experts), imatrix != nullptr);
  int64_t total = 0;
  for (const auto* t : order) {
    const auto ne = model::ggml_ne(t->shape);
    const gguf::TensorType type = recipe.next({t->name, ne}, gguf::TensorType::F32);
    if (type == gguf::TensorType::F32) continue;
    const model::ParamTensor* in_run = layout.find(t->name);
    if (!in_run)
      fail("config: train.qat on a LoRA run needs the base's {} in float, but init.from holds it quantized: start "
           "from an F32, F16 or BF16 file of the model",
           t->name);
    const int64_t cols = int64_t(ne[0]);
    std::vector<float> importance;
    if (imatrix) importance = convert::tensor_importance(t->name, type, ne, *imatrix, nullptr);
    const size_t row_bytes = gguf::storage_bytes(type, size_t(cols));
    tensors_.push_back({t->name, in_run->offset, t->size / cols, cols, type, std::move(importance),
                        ne.size() > 1 ? int64_t(ne[1]) : 1, ne, total, row_bytes});
    total += t->size;
  }
  masters_.resize(size_t(total));
  if (every_ > 1) errors_.resize(size_t(total));
}

void QatWeights::quantize(float* params) {
  if (active_) return;
  active_ = true;
  const double t0 = now_seconds();
  const bool fresh = requantize_ || errors_.empty();  // every step quantizes anew when K = 1
  requantize_ = false;
  // A LoRA run quantizes W + s B A, the matrix `export --merge-lora` stores
  // (its rows summed as merge_lora sums them), and leaves W' = Q(W + s B A)
  // - s B A in W's place: the forward's W' x + s B (A x) is the quantized
  // merged matrix's product up to float rounding, and the branch's own
  // backward gives A and B the straight-through gradient.
  const model::LoraAdapter adapter =
      fresh && config_.lora.rank > 0 ? model::lora_adapter_of(config_, layout_, params) : model::LoraAdapter{};
  std::map<std::string, const model::LoraPair*> pair_of;
  for (const auto& p : adapter.pairs) pair_of[p.weight] = &p;
  for (const Tensor& t : tensors_) {
    float* w = params + t.offset;
    std::memcpy(masters_.data() + t.at, w, size_t(t.rows * t.cols) * sizeof(float));
    if (!fresh) {
      add_last_errors(t, w);
      continue;
    }
    const auto it = pair_of.find(t.name);
    const model::LoraPair* pair = it == pair_of.end() ? nullptr : it->second;
    quantize_tensor(t, w, pair, pair ? adapter.scale_of(*pair, 1.0) : 0.0);
  }
  last_seconds_ = now_seconds() - t0;
}

// Between re-quantizations: the masters plus the last rounding errors.
void QatWeights::add_last_errors(const Tensor& t, float* w) const {
  const float* e = errors_.data() + t.at;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < t.rows * t.cols; ++i) w[i] += e[i];
}

// New blocks of W (+ s B A with a LoRA pair), their values in W's place
// (minus s B A), and their rounding errors kept when K > 1.
void QatWeights::quantize_tensor(const Tensor& t, float* w, const model::LoraPair* pair, double scale) {
  const quant::TypeCodec& c = quant::codec(t.type, "quantize to");
  // rows are independent: each thread quantizes and dequantizes its own
#pragma omp parallel
  {
    std::vector<uint8_t> bytes(t.row_bytes);
    std::vector<float> q(size_t(t.cols));
    std::vector<double> delta(pair ? size_t(t.cols) : 0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < t.rows; ++r) {
      float* row = w + r * t.cols;
      if (pair) {  // an expert stack's row r is expert r / out's row r % out
        const int64_t e = r / pair->out, o = r % pair->out;
        model::lora_row_delta(pair->a.data() + e * pair->rank * pair->in, pair->b.data() + e * pair->out * pair->rank,
                              pair->rank, pair->in, o, scale, delta.data());
        for (int64_t i = 0; i < t.cols; ++i) row[i] = float(double(row[i]) + delta[i]);
      }
      if (t.importance.empty()) c.from_float(row, bytes.data(), size_t(t.cols));
      else
        c.from_float_weighted(row, t.importance.data() + (r / t.rows_per_slice) * t.cols, bytes.data(), size_t(t.cols));
      c.to_float(bytes.data(), q.data(), size_t(t.cols));
      if (!errors_.empty())
        for (int64_t i = 0; i < t.cols; ++i) errors_[size_t(t.at + r * t.cols + i)] = q[size_t(i)] - row[i];
      for (int64_t i = 0; i < t.cols; ++i) row[i] = pair ? float(double(q[size_t(i)]) - delta[i]) : q[size_t(i)];
    }
  }
}

void QatWeights::add_errors(gguf::GgufWriter& w) const {
  if (errors_.empty()) return;  // every step makes new blocks
  w.set(kTypeKey, gguf::Value::str(type_));
  w.set(kImatrixKey, gguf::Value::str(imatrix_));
  for (const Tensor& t : tensors_)
    w.add_tensor_raw("qat.error." + t.name, gguf::TensorType::F32, t.ne, errors_.data() + t.at);
}

void QatWeights::load_errors(const gguf::GgufFile& state) {
  if (errors_.empty()) return;
  bool any = false;
  for (const auto& ti : state.tensors()) any = any || ti.name.rfind("qat.error.", 0) == 0;
  if (!any) return;  // saved with train.qat_every = 1: new blocks at the next step
  // The errors are those of another type's (or importance matrix's) blocks.
  for (const auto& [key, mine] : {std::pair{kTypeKey, type_}, std::pair{kImatrixKey, imatrix_}})
    if (state.get_string(key) != mine)
      fail("{}: {} is \"{}\", this run's \"{}\": train.qat and train.qat_imatrix cannot change on --resume",
           state.path(), key, state.get_string(key), mine);
  for (const Tensor& t : tensors_) {
    const std::string name = "qat.error." + t.name;
    const gguf::TensorInfo* ti = state.find_tensor(name);
    if (!ti || ti->type != gguf::TensorType::F32 || ti->shape() != t.ne)
      fail("{}: tensor '{}' {}: train.qat cannot change on --resume", state.path(), name,
           ti ? "has another type or shape" : "is missing");
    std::memcpy(errors_.data() + t.at, ti->data, size_t(t.rows * t.cols) * sizeof(float));
  }
  requantize_ = false;
}

void QatWeights::restore(float* params) {
  if (!active_) return;
  active_ = false;
  for (const Tensor& t : tensors_)
    std::memcpy(params + t.offset, masters_.data() + t.at, size_t(t.rows * t.cols) * sizeof(float));
}

}  // namespace ggtrain::train
