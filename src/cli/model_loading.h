#pragma once
// Loads any llama GGUF (config, F32 master weights, tokenizer) for the
// inference commands.
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "model/config.h"

namespace ggtrain::cli {

struct LoadedModel {
  model::LlamaConfig config;
  std::vector<float> params;  // laid out by model::ParamLayout(config)
};

LoadedModel load_model(const std::string& path);
std::vector<int32_t> parse_token_list(const std::string& csv);

}  // namespace ggtrain::cli
