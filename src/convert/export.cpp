#include "convert/export.h"

#include <filesystem>

#include "convert/quantize.h"
#include "gguf/reader.h"
#include "model/checkpoint.h"
#include "model/lora.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
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

// The llama.cpp file type whose weights are all `type`.
quant::FileType file_type_of(gguf::TensorType type) {
  if (type == gguf::TensorType::Q8_0) return quant::FileType::Q8_0;
  const auto ft = quant::float_file_type(type);
  if (!ft) fail("export: type {} is not one of F32, F16, BF16, Q8_0", gguf::type_name(type));
  return *ft;
}

}  // namespace

void export_model(const std::string& in_path, const std::string& out_path, gguf::TensorType type) {
  export_quantized(in_path, out_path, file_type_of(type));
}

void merge_lora_model(const std::string& base_path, const std::string& adapter_path, double user_scale,
                      const std::string& out_path, gguf::TensorType type) {
  merge_lora_quantized(base_path, adapter_path, user_scale, out_path, file_type_of(type));
}

QuantizeReport export_quantized(const std::string& in_path, const std::string& out_path, quant::FileType ft,
                                const ImatrixInput* imatrix) {
  return quantize_model(gguf::GgufFile(in_path), ft, out_path, {}, {}, imatrix);
}

QuantizeReport merge_lora_quantized(const std::string& base_path, const std::string& adapter_path, double user_scale,
                                    const std::string& out_path, quant::FileType ft, const ImatrixInput* imatrix) {
  const gguf::GgufFile f(base_path);
  const model::Config c = model::config_from_gguf(f);
  const model::ParamLayout layout(c);
  std::vector<float> params(size_t(layout.total()));
  model::load_model_params(f, layout, params.data());
  const gguf::GgufFile adapter(adapter_path);
  model::merge_lora(model::read_lora_adapter(adapter, c), user_scale, layout, params.data());
  const FloatSource merged = [&](const gguf::TensorInfo& t) {
    const model::ParamTensor* p = layout.find(t.name);
    if (!p) return quant::tensor_floats(f, t);  // not a parameter (rope_freqs.weight): as the base has it
    const float* begin = params.data() + p->offset;
    return std::vector<float>(begin, begin + t.n_elements);
  };
  return quantize_model(f, ft, out_path, merged, adapter_chat_keys(adapter), imatrix);
}

}  // namespace ggtrain::convert
