#pragma once
// A Hugging Face tokenizer.json read into the tokenizer.ggml.* keys llama.cpp's
// convert_hf_to_gguf.py writes for it, so that the vocabulary of a model
// downloaded from the Hub can train, tokenize and chat like the GGUF of it:
// byte-level BPE (Llama 3.x, Qwen2/2.5/3, SmolLM, GPT-2) as model "gpt2";
// SentencePiece BPE with byte fallback (Gemma, Llama 2, Mistral, TinyLlama)
// as model "llama", the converter's reading of tokenizer.model.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/writer.h"

namespace ggtrain::tokenizer {

struct HfVocabulary {
  std::string model = "gpt2";  // tokenizer.ggml.model: "gpt2" or "llama" (SentencePiece)
  std::string pre;  // tokenizer.ggml.pre, from the Split regex ("default" for llama)
  std::vector<std::string> tokens;  // by id; an id the file lacks is "[PAD<id>]"
  // llama_token_type: 1 normal, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // "a b" (gpt2)
  // llama: each piece's priority in llama.cpp's merge loop (higher merges
  // first). tokenizer.json keeps merges, not SentencePiece's scores, so a
  // piece scores minus the rank of the first merge that makes it (HF's
  // converter sorted the merges by score); pieces no merge makes score 0
  // (a merge loop never produces them), added tokens -1000 as the converter.
  std::vector<float> scores;
  std::optional<bool> add_space_prefix;  // llama: written only when false (Gemma), as the converter
  int32_t bos = -1, eos = -1, pad = -1, unk = -1;  // -1: not named
  bool add_bos = false;
  std::optional<bool> add_eos;  // llama: tokenizer_config.json's add_eos_token
  std::string chat_template;  // tokenizer_config.json's, or ""
};

// tokenizer_json: the file; config_json: its tokenizer_config.json ("" when
// absent: no special ids, no template). Every error names the file and the
// member and says what is supported.
HfVocabulary read_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_json);

// The tokenizer.ggml.* keys (model "gpt2") and tokenizer.chat_template.
void add_hf_vocabulary(gguf::GgufWriter& w, const HfVocabulary& v);

}  // namespace ggtrain::tokenizer
