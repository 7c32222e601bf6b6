#include "model/export.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>

#include "chat/template.h"
#include "gguf/convert.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/lora.h"
#include "model/params.h"
#include "model/quantize.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::model {

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
                   const std::function<void(const LlamaConfig&, const ParamLayout&, float*)>& change,
                   const MetadataChanges& changes = {}) {
  if (!gguf::is_float_convertible(type))
    fail("export: type {} is not one of F32, F16, BF16, Q8_0", gguf::type_name(type));
  gguf::GgufFile f(in_path);
  const LlamaConfig c = config_from_llama_gguf(f);
  const ParamLayout layout(c);
  std::vector<float> params(size_t(layout.total()));
  load_llama_params(f, layout, params.data());
  if (change) change(c, layout, params.data());
  gguf::GgufWriter w;
  for (const auto& [k, v] : f.metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const auto& [k, v] : changes) w.set(k, v);
  add_llama_model(w, c, layout, params.data(), type);
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
      [&](const LlamaConfig& c, const ParamLayout& layout, float* p) {
        merge_lora(read_lora_adapter(a, c), user_scale, layout, p);
      },
      adapter_chat_keys(a));
}

QuantizeReport export_quantized(const std::string& in_path, const std::string& out_path, quant::FileType ft) {
  return quantize_model(gguf::GgufFile(in_path), ft, out_path);
}

QuantizeReport merge_lora_quantized(const std::string& base_path, const std::string& adapter_path, double user_scale,
                                    const std::string& out_path, quant::FileType ft) {
  const gguf::GgufFile f(base_path);
  const LlamaConfig c = config_from_llama_gguf(f);
  const ParamLayout layout(c);
  std::vector<float> params(size_t(layout.total()));
  load_llama_params(f, layout, params.data());
  const gguf::GgufFile adapter(adapter_path);
  merge_lora(read_lora_adapter(adapter, c), user_scale, layout, params.data());
  const FloatSource merged = [&](const gguf::TensorInfo& t) {
    const ParamTensor* p = layout.find(t.name);
    if (!p) return f.to_float(t);  // not a parameter (rope_freqs.weight): as the base has it
    const float* begin = params.data() + p->offset;
    return std::vector<float>(begin, begin + t.n_elements);
  };
  return quantize_model(f, ft, out_path, merged, adapter_chat_keys(adapter));
}

std::string ollama_modelfile(const std::string& gguf_name, const std::string& eos_piece,
                             const std::string& chat_template) {
  const auto t = chat::detect_template(chat_template);
  if (!t)
    return fmt::format(
        "FROM ./{}\n"
        "TEMPLATE \"\"\"{{{{ .Prompt }}}}\"\"\"\n"
        "PARAMETER stop \"{}\"\n"
        "PARAMETER temperature 0.8\n",
        gguf_name, eos_piece);
  const chat::TemplateInfo& info = chat::template_info(*t);
  std::string stops = fmt::format("PARAMETER stop \"{}\"\n", info.end_of_turn);
  if (eos_piece != info.end_of_turn) stops += fmt::format("PARAMETER stop \"{}\"\n", eos_piece);
  return fmt::format("FROM ./{}\nTEMPLATE \"\"\"{}\"\"\"\n{}PARAMETER temperature 0.8\n", gguf_name, info.ollama,
                     stops);
}

std::string write_ollama_modelfile(const std::string& gguf_path) {
  gguf::GgufFile f(gguf_path);
  std::string eos = "</s>";
  const auto* tokens = f.find("tokenizer.ggml.tokens");
  if (tokens && f.find("tokenizer.ggml.eos_token_id")) {
    const uint64_t id = f.get_uint("tokenizer.ggml.eos_token_id");
    if (id < tokens->items.size()) eos = tokens->items[id].s;
  }
  const std::filesystem::path p(gguf_path);
  const auto dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  const std::string out = (dir / "Modelfile").string();
  const gguf::Value* tmpl = f.find("tokenizer.chat_template");
  const std::string chat_template = tmpl && tmpl->type == gguf::ValueType::STRING ? tmpl->s : "";
  const std::string text = ollama_modelfile(p.filename().string(), eos, chat_template);
  write_file_atomic(out, text.data(), text.size());
  return out;
}

}  // namespace ggtrain::model
