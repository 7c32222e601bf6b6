#pragma once
// Trains the tokenizer ggtrain models use: a sentencepiece BPE model with
// byte fallback, so every UTF-8 string is encodable and the result converts
// to a llama.cpp "llama" vocabulary (tokenizer/tokenizer.h) without loss.
#include <cstdint>
#include <string>

namespace ggtrain::tokenizer {

// Trains on `input_path` (one sentence per line) and writes the sentencepiece
// model to exactly `out_model_path`, atomically. Error on a missing input, a
// vocabulary below minimum_bpe_vocab (naming the size that works), or any
// sentencepiece failure. sentencepiece logs only
// warnings unless GGTRAIN_VERBOSE is set.
struct SentencepieceReport {
  int64_t lines = 0;  // lines of the input
  int64_t long_lines = 0;  // lines sentencepiece skips: longer than max_line_bytes
  int64_t max_line_bytes = 0;
};
// 256 byte pieces + <unk>, <s>, </s>.
constexpr int kReservedBpePieces = 259;

// The smallest vocabulary sentencepiece accepts for the text of `path`: the
// 259 reserved pieces and one per distinct character (character_coverage
// 1.0 keeps every character a piece of its own).
int64_t minimum_bpe_vocab(const std::string& path);

SentencepieceReport train_sentencepiece_bpe(const std::string& input_path, int vocab_size,
                                            const std::string& out_model_path);

}  // namespace ggtrain::tokenizer
