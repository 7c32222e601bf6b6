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

// Writes `Modelfile` beside `gguf_path` for the model in it; returns its path.
std::string write_ollama_modelfile(const std::string& gguf_path);

}  // namespace ggtrain::chat
