#include "cli/lora_options.h"

#include "gguf/reader.h"
#include "model/lora.h"

namespace ggtrain::cli {

void add_lora_options(CLI::App* cmd, LoraOptions& o) {
  cmd->add_option("--lora", o.path, "LoRA adapter GGUF applied to the model (llama.cpp's format)");
  cmd->add_option("--lora-scale", o.scale, "Scale of the adapter (default 1)");
}

void apply_lora_options(const LoraOptions& o, infer::Decoder& dec, tokenizer::Tokenizer& tok) {
  if (o.path.empty()) return;
  const gguf::GgufFile f(o.path);
  dec.add_lora(model::read_lora_adapter(f, dec.config()), o.scale);
  tok.read_chat_keys(f);
}

}  // namespace ggtrain::cli
