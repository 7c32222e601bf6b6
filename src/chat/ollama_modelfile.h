#pragma once
// The ollama Modelfile beside an exported GGUF (`ggtrain export --ollama`):
// ollama does not run a GGUF's Jinja chat template, so the Modelfile spells
// the template out in ollama's own TEMPLATE syntax.
#include <string>

namespace ggtrain::chat {

// An ollama Modelfile for the model stored at `gguf_name` (relative to the
// Modelfile): for a chat template ggtrain renders (the model's
// tokenizer.chat_template, as llama.cpp recognises it) that template in
// ollama's TEMPLATE syntax, stopping at its end of turn and at `eos_piece`;
// otherwise a raw completion model, stopping at `eos_piece`.
std::string ollama_modelfile(const std::string& gguf_name, const std::string& eos_piece,
                             const std::string& chat_template = "");

// What write_ollama_modelfile wrote.
struct WrittenModelfile {
  std::string path;
  // The template its TEMPLATE renders when that is not the model's own
  // chat template (a family's Jinja with tool calls or reasoning blocks,
  // rendered as plain turns), else empty.
  std::string approximated;
};

// Writes OUT.Modelfile beside `gguf_path` = OUT.gguf (one per export, so an
// export never replaces another model's Modelfile) for the model in it.
WrittenModelfile write_ollama_modelfile(const std::string& gguf_path);

}  // namespace ggtrain::chat
