#include "convert/quantize.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include <fmt/core.h>

#include "gguf/writer.h"
#include "model/config.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "util/error.h"

namespace ggtrain::convert {

namespace {

// F32, F16, BF16: one element a block.
bool is_float_type(gguf::TensorType t) {
  const quant::TypeCodec* c = quant::find_codec(t);
  return c && c->block_size == 1;
}

// The n floats of tensor `name` (shape ne) stored as `type`, each row
// against its importance values when `imatrix` has an entry for it: ggml's
// quantize_chunk with llama-quantize's per-row pointer (an expert's rows use
// that expert's slice). Counts the weighted ones.
std::vector<uint8_t> encode_tensor(const std::string& name, gguf::TensorType type, const std::vector<uint64_t>& ne,
                                   const float* x, const ImatrixInput& imatrix, QuantizeReport& report) {
  const uint64_t cols = ne[0], rows_per_slice = ne.size() > 1 ? ne[1] : 1;
  uint64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
  std::vector<uint8_t> out(gguf::storage_bytes(type, size_t(cols * rows)));
  const std::vector<float> qw = tensor_importance(name, type, ne, imatrix, &report);
  if (qw.empty()) {
    quant::encode_floats(type, x, out.data(), size_t(cols * rows));
    return out;
  }
  const quant::TypeCodec& c = quant::codec(type, "quantize to");
  const size_t row_bytes = out.size() / size_t(rows);
  // rows are independent (each writes its own bytes): every thread, as llama-quantize's nthread
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t r = 0; r < int64_t(rows); ++r)
    c.from_float_weighted(x + r * int64_t(cols), qw.data() + (uint64_t(r) / rows_per_slice) * cols,
                          out.data() + size_t(r) * row_bytes, size_t(cols));
  ++report.weighted;
  return out;
}

// Keys llama_model_quantize sets itself (appended last) or drops.
bool replaced_key(const std::string& k) {
  return k == "general.quantization_version" || k == "general.file_type" || k.rfind("split.", 0) == 0;
}

// What llama-quantize --imatrix records, after general.file_type: the
// file's path and first dataset as it was given (at most 127 bytes, its
// fixed-size override strings), the entry count, and the chunk count when known.
void add_imatrix_keys(gguf::GgufWriter& w, const ImatrixInput& imatrix) {
  w.set("quantize.imatrix.file", gguf::Value::str(imatrix.path.substr(0, 127)));
  if (!imatrix.matrix.datasets.empty())
    w.set("quantize.imatrix.dataset", gguf::Value::str(imatrix.matrix.datasets[0].substr(0, 127)));
  w.set("quantize.imatrix.entries_count", gguf::Value::u32(uint32_t(imatrix.matrix.entries.size())));
  if (imatrix.matrix.chunk_count > 0)
    w.set("quantize.imatrix.chunks_count", gguf::Value::u32(imatrix.matrix.chunk_count));
}

}  // namespace

ImatrixInput load_imatrix_input(const std::string& path) {
  ImatrixInput in{path, quant::read_importance_matrix(path)};
  if (!in.matrix.legacy && !in.matrix.has_metadata)
    fail("{}: no imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size keys; llama-quantize refuses such a "
         "file too (write it again with `ggtrain imatrix` or a current llama-imatrix)",
         path);
  return in;
}

std::vector<float> tensor_importance(const std::string& name, gguf::TensorType type, const std::vector<uint64_t>& ne,
                                     const ImatrixInput& imatrix, QuantizeReport* report) {
  const quant::TypeCodec& c = quant::codec(type, "quantize to");
  const uint64_t cols = ne[0], slices = ne.size() > 2 ? ne[2] : 1;
  const auto it = imatrix.matrix.entries.find(name);
  const bool found = it != imatrix.matrix.entries.end();
  const bool fits = found && uint64_t(it->second.sums.size()) == cols * slices;
  // llama-quantize refuses a mismatched entry, except the embedding's
  if (found && !fits && name != "token_embd.weight")
    fail("{}: entry '{}' has {} values; the tensor has {} columns{}: this importance matrix is for another model",
         imatrix.path, name, it->second.sums.size(), cols, slices > 1 ? fmt::format(" x {} experts", slices) : "");
  if (!fits || !c.from_float_weighted) {
    if (!found && c.from_float_weighted && report) report->without_importance.push_back(name);
    return {};
  }
  return quant::importance_values(it->second, imatrix.matrix.legacy);
}

QuantizeReport quantize_model(const gguf::GgufFile& in, quant::FileType ft, const std::string& out_path,
                              const FloatSource& floats, const MetadataChanges& changes, const ImatrixInput* imatrix) {
  const model::Config c = model::config_from_gguf(in);
  std::vector<const gguf::TensorInfo*> order;
  std::vector<quant::TensorShape> shapes;
  for (const auto& t : in.tensors()) {
    order.push_back(&t);
    shapes.push_back({t.name, t.shape()});
  }
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return quant::llama_cpp_tensor_before(a->name, b->name); });

  gguf::GgufWriter w;
  for (const auto& [k, v] : in.metadata()) {
    if (k == "general.alignment") w.set_alignment(uint32_t(in.get_uint(k)));
    else if (!replaced_key(k)) w.set(k, v);
  }
  for (const auto& [k, v] : changes) w.set(k, v);  // set() replaces a key in place
  w.set("general.quantization_version", gguf::Value::u32(2));  // ggml's GGML_QNT_VERSION
  w.set("general.file_type", gguf::Value::u32(uint32_t(ft)));
  if (imatrix) add_imatrix_keys(w, *imatrix);

  // llama.cpp counts the prediction blocks among the layers (n_layer_all).
  quant::TypeRecipe recipe(ft, shapes, c.n_layers + c.n_nextn, int(c.n_experts), imatrix != nullptr);
  QuantizeReport report;
  std::deque<std::vector<float>> values;  // kept until write()
  std::deque<std::vector<uint8_t>> encoded;
  for (const auto* t : order) {
    const auto type = recipe.next({t->name, t->shape()}, t->type);
    if (type == t->type && !floats) {
      w.add_tensor_raw(t->name, t->type, t->shape(), t->data);
      continue;
    }
    // A quantized weight is dequantized for a float file type (llama.cpp
    // would refuse), never quantized again.
    if (!floats && !is_float_type(t->type) && !is_float_type(type))
      fail("{}: tensor '{}' is already {}; quantize from an F32, F16 or BF16 model", in.path(), t->name,
           gguf::type_name(t->type));
    values.push_back(floats ? floats(*t) : quant::tensor_floats(in, *t));
    // ggml's quantizers turn a NaN or Inf into garbage blocks (or undefined
    // float-to-int conversions): refuse instead of writing a broken model.
    const auto& v = values.back();
    const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
    if (bad != v.end())
      fail("{}: tensor '{}' has the non-finite value {} at element {}; cannot quantize it", in.path(), t->name, *bad,
           bad - v.begin());
    if (imatrix && !is_float_type(type)) {
      encoded.push_back(encode_tensor(t->name, type, t->shape(), v.data(), *imatrix, report));
      w.add_tensor_raw(t->name, type, t->shape(), encoded.back().data());
    } else {
      quant::add_float_tensor(w, t->name, type, t->shape(), v.data());
    }
  }
  w.write(out_path);
  report.quantized = recipe.quantized();
  report.fallbacks = recipe.fallbacks();
  return report;
}

}  // namespace ggtrain::convert
