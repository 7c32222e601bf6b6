#pragma once
// Trains the tokenizer ggtrain models use: a sentencepiece BPE model with
// byte fallback, so every UTF-8 string is encodable and the result converts
// to a llama.cpp "llama" vocabulary (data/tokenizer.h) without loss.
#include <string>

namespace ggtrain::data {

// Trains on `input_path` (one sentence per line) and writes the sentencepiece
// model to exactly `out_model_path`, atomically. Error on a missing input, a
// vocabulary too small for the 256 byte pieces + <unk>/<s>/</s> and the
// text's characters, or any sentencepiece failure. sentencepiece logs only
// warnings unless GGTRAIN_VERBOSE is set.
void train_sentencepiece_bpe(const std::string& input_path, int vocab_size,
                             const std::string& out_model_path);

}  // namespace ggtrain::data
