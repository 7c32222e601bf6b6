#pragma once
// What the commands that run a model share (generate, chat, eval): the
// flags llama.cpp gives them (-m, -c, --lora, --lora-scale, -t), the KV
// cache type, and the model they load from those.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "cli/lora_options.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::cli {

struct InferenceOptions {
  std::string model;
  int64_t ctx = 0, threads = 0;  // 0: the model's context, at most 4096; OpenMP's thread count
  std::string cache_type = "f16";  // llama.cpp's default
  LoraOptions lora;
};

// model_required = false: the command checks -m itself (eval takes --run instead).
void add_inference_options(CLI::App* cmd, InferenceOptions& o, bool model_required = true);

// The GGUF mapped, its decoder (the threads set first, the adapter
// applied; not warmed up) and its vocabulary.
struct InferenceModel {
  explicit InferenceModel(const InferenceOptions& o);
  gguf::GgufFile file;  // first: the decoder reads its weights from the map
  infer::Decoder decoder;
  tokenizer::Tokenizer tokenizer;
};

// What llama.cpp's perplexity and imatrix tools put first in each chunk:
// BOS when the vocabulary asks for it, else -1 (the chunk as it is).
int32_t chunk_bos(const tokenizer::Tokenizer& tok);

// A UTF-8 text file's tokens as llama.cpp's perplexity and imatrix tools
// take them: the whole file, BOS first when the vocabulary asks for it. A
// file that is no text (a model, an archive) is refused naming its first bad byte.
std::vector<int32_t> text_file_tokens(const tokenizer::Tokenizer& tok, const std::string& path);

}  // namespace ggtrain::cli
