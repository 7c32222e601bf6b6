#pragma once
// Test-built "gpt2" (byte-level BPE) vocabularies: merges learned from text
// with the textbook algorithm (most frequent adjacent pair first, within the
// words of the pre-tokenizer), written as a llama GGUF with tiny random
// weights so that llama.cpp loads it as a model.
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"

namespace ggtrain::test_support {

// Kinds, each named by its tokenizer.ggml.pre and each exercising a
// different corner of llama.cpp's loader and tokenizer:
//   "default":   the byte token for 0xF0 is missing (4-byte characters lose
//                that byte, as llama.cpp drops it); model name "modern-bert"
//                gives the user-defined [MASK] llama.cpp's LSTRIP.
//   "gpt-2":     model name "phi3" gives user-defined tokens RSTRIP.
//   "llama-bpe": user-defined tokens of equal length that overlap, amid 40
//                reserved control tokens (llama.cpp's unstable sort of the
//                special tokens decides which is cut out first), "<|im_end|>"
//                typed user-defined (llama.cpp makes it control), whole-word
//                tokens no merge reaches (taken whole: ignore_merges).
//   "smollm":    a user-defined token with spaces, "<|channel|>" typed control
//                (llama.cpp makes it user-defined).
//   "qwen2":     Qwen2.5/Qwen3's: llama3's split with single digits, no
//                ignore_merges, spaces kept when decoding, <think> tags.
//   "lfm2":      LFM2's name for llama3's split (ignore_merges, BOS added),
//                with its chat and tool-call control tokens.
//   "qwen35":    Qwen3.5's: qwen2's split with combining marks (\p{M}) in
//                letter runs and out of punctuation runs.
// `n_merges` merges at most; lines are the training text.
struct BpeVocabFile {
  std::vector<std::string> tokens, merges;
  std::vector<int32_t> types;
  int32_t bos = -1, eos = -1;
};
BpeVocabFile build_bpe_vocab(const std::string& kind, const std::vector<std::string>& lines, int n_merges);

// Writes it (tokenizer.ggml.* + a 1-layer llama with random weights).
void write_bpe_vocab_gguf(const std::string& path, const std::string& kind, const BpeVocabFile& v);

// The tokenizer.* keys of `vocab` in a 1-layer llama with random weights.
void write_model_with_vocabulary(const std::string& path, const gguf::GgufFile& vocab);

}  // namespace ggtrain::test_support
