#include "chat/ollama_modelfile.h"

#include <fmt/format.h>

#include <filesystem>

#include "chat/template.h"
#include "gguf/reader.h"
#include "util/atomic_file.h"

namespace ggtrain::chat {

std::string ollama_modelfile(const std::string& gguf_name, const std::string& eos_piece,
                             const std::string& chat_template) {
  const auto t = detect_template(chat_template);
  if (!t)
    return fmt::format("FROM ./{}\n"
                       "TEMPLATE \"\"\"{{{{ .Prompt }}}}\"\"\"\n"
                       "PARAMETER stop \"{}\"\n"
                       "PARAMETER temperature 0.8\n",
                       gguf_name, eos_piece);
  const TemplateInfo& info = template_info(*t);
  std::string stops = fmt::format("PARAMETER stop \"{}\"\n", info.end_of_turn);
  if (eos_piece != info.end_of_turn) stops += fmt::format("PARAMETER stop \"{}\"\n", eos_piece);
  return fmt::format("FROM ./{}\nTEMPLATE \"\"\"{}\"\"\"\n{}PARAMETER temperature 0.8\n", gguf_name, info.ollama,
                     stops);
}

WrittenModelfile write_ollama_modelfile(const std::string& gguf_path) {
  gguf::GgufFile f(gguf_path);
  std::string eos = "</s>";
  const auto* tokens = f.find("tokenizer.ggml.tokens");
  if (tokens && f.find("tokenizer.ggml.eos_token_id")) {
    const uint64_t id = f.get_uint("tokenizer.ggml.eos_token_id");
    if (id < tokens->items.size()) eos = tokens->items[id].s;
  }
  std::filesystem::path out(gguf_path);
  out.replace_extension(".Modelfile");
  const gguf::Value* tmpl = f.find("tokenizer.chat_template");
  const std::string chat_template = tmpl && tmpl->type == gguf::ValueType::STRING ? tmpl->s : "";
  const std::string text = ollama_modelfile(std::filesystem::path(gguf_path).filename().string(), eos, chat_template);
  write_file_atomic(out.string(), text.data(), text.size());
  WrittenModelfile written{out.string(), ""};
  if (const auto t = detect_template(chat_template); t && template_info(*t).jinja != chat_template)
    written.approximated = std::string(template_info(*t).name);
  return written;
}

}  // namespace ggtrain::chat
