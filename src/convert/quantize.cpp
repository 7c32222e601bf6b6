#include "convert/quantize.h"

#include <algorithm>
#include <cmath>
#include <deque>

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

// Keys llama_model_quantize sets itself (appended last) or drops.
bool replaced_key(const std::string& k) {
  return k == "general.quantization_version" || k == "general.file_type" || k.rfind("split.", 0) == 0;
}

}  // namespace

QuantizeReport quantize_model(const gguf::GgufFile& in, quant::FileType ft, const std::string& out_path,
                              const FloatSource& floats, const MetadataChanges& changes) {
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

  quant::TypeRecipe recipe(ft, shapes, c.n_layers, int(c.n_experts));
  std::deque<std::vector<float>> values;  // kept until write()
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
    quant::add_float_tensor(w, t->name, type, t->shape(), values.back().data());
  }
  w.write(out_path);
  return {recipe.quantized(), recipe.fallbacks()};
}

}  // namespace ggtrain::convert
