#include "convert/export.h"

#include <filesystem>
#include <functional>

#include "convert/quantize.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/lora.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "util/error.h"

namespace ggtrain::convert {

namespace {

// A chat adapter's template and end-of-turn id: the merged model answers
// through them, as the adapter was trained to (the base may have none, or
// another).
MetadataChanges adapter_chat_keys(const gguf::GgufFile& adapter) {
  MetadataChanges keys;
  for (const char* k : {"tokenizer.chat_template", "tokenizer.ggml.eot_token_id"})
    if (const gguf::Value* v = adapter.find(k)) keys.emplace_back(k, *v);
  return keys;
}

// The model of `in_path` with every weight as F32, `change` applied, written
// as `type` with all metadata kept (and `changes` applied to it).
void rewrite_model(const std::string& in_path, const std::string& out_path, gguf::TensorType type,
                   const std::function<void(const model::Config&, const model::ParamLayout&, float*)>& change,
                   const MetadataChanges& changes = {}) {
  if (!quant::is_float_convertible(type))
    fail("export: type {} is not one of F32, F16, BF16, Q8_0", gguf::type_name(type));
  gguf::GgufFile f(in_path);
  const model::Config c = model::config_from_llama_gguf(f);
  const model::ParamLayout layout(c);
  std::vector<float> params(size_t(layout.total()));
  model::load_llama_params(f, layout, params.data());
  if (change) change(c, layout, params.data());
  gguf::GgufWriter w;
  for (const auto& [k, v] : f.metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const auto& [k, v] : changes) w.set(k, v);
  model::add_llama_model(w, c, layout, params.data(), type);
  w.write(out_path);
}

}  // namespace

void export_model(const std::string& in_path, const std::string& out_path, gguf::TensorType type) {
  rewrite_model(in_path, out_path, type, {});
}

void merge_lora_model(const std::string& base_path, const std::string& adapter_path, double user_scale,
                      const std::string& out_path, gguf::TensorType type) {
  const gguf::GgufFile a(adapter_path);
  rewrite_model(
      base_path, out_path, type,
      [&](const model::Config& c, const model::ParamLayout& layout, float* p) {
        model::merge_lora(model::read_lora_adapter(a, c), user_scale, layout, p);
      },
      adapter_chat_keys(a));
}

QuantizeReport export_quantized(const std::string& in_path, const std::string& out_path, quant::FileType ft) {
  return quantize_model(gguf::GgufFile(in_path), ft, out_path);
}

QuantizeReport merge_lora_quantized(const std::string& base_path, const std::string& adapter_path, double user_scale,
                                    const std::string& out_path, quant::FileType ft) {
  const gguf::GgufFile f(base_path);
  const model::Config c = model::config_from_llama_gguf(f);
  const model::ParamLayout layout(c);
  std::vector<float> params(size_t(layout.total()));
  model::load_llama_params(f, layout, params.data());
  const gguf::GgufFile adapter(adapter_path);
  model::merge_lora(model::read_lora_adapter(adapter, c), user_scale, layout, params.data());
  const FloatSource merged = [&](const gguf::TensorInfo& t) {
    const model::ParamTensor* p = layout.find(t.name);
    if (!p) return quant::tensor_floats(f, t);  // not a parameter (rope_freqs.weight): as the base has it
    const float* begin = params.data() + p->offset;
    return std::vector<float>(begin, begin + t.n_elements);
  };
  return quantize_model(f, ft, out_path, merged, adapter_chat_keys(adapter));
}

}  // namespace ggtrain::convert
