#pragma once
// --lora ADAPTER.gguf [--lora-scale S] for the commands that run a model
// (llama.cpp's flags): the adapter is applied unmerged, as llama.cpp does.
#include <CLI/CLI.hpp>

#include <string>

#include "infer/decoder.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::cli {

struct LoraOptions {
  std::string path;
  double scale = 1.0;
};

void add_lora_options(CLI::App* cmd, LoraOptions& o);
// Reads the adapter (checked against the decoder's model) and applies it;
// a chat adapter's template and end-of-turn id replace the base's in `tok`
// (the adapter was trained to answer through them).
void apply_lora_options(const LoraOptions& o, infer::Decoder& dec, tokenizer::Tokenizer& tok);

}  // namespace ggtrain::cli
