#pragma once
// A Hugging Face tokenizer.json (byte-level BPE: Llama 3.x, Qwen2/2.5/3,
// SmolLM, GPT-2) read into the tokenizer.ggml.* keys llama.cpp's
// convert_hf_to_gguf.py writes for it, so that the vocabulary of a model
// downloaded from the Hub can train, tokenize and chat like the GGUF of it.
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/writer.h"

namespace ggtrain::data {

struct HfVocabulary {
  std::string pre;                   // tokenizer.ggml.pre, from the Split regex
  std::vector<std::string> tokens;   // by id; an id the file lacks is "[PAD<id>]"
  std::vector<int32_t> types;        // llama_token_type: 1 normal, 3 control, 4 user-defined, 5 unused
  std::vector<std::string> merges;   // "a b"
  int32_t bos = -1, eos = -1, pad = -1;  // -1: not named
  bool add_bos = false;
  std::string chat_template;         // tokenizer_config.json's, or ""
};

// tokenizer_json: the file; config_json: its tokenizer_config.json ("" when
// absent: no special ids, no template). Every error names the file and the
// member and says what is supported.
HfVocabulary read_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_json);

// The tokenizer.ggml.* keys (model "gpt2") and tokenizer.chat_template.
void add_hf_vocabulary(gguf::GgufWriter& w, const HfVocabulary& v);

}  // namespace ggtrain::data
