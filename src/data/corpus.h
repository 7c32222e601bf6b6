#pragma once
// Turns a text corpus into train/validation token files. Each non-empty line
// is a document, encoded as [BOS] + tokens; a document goes to validation
// when a hash of (seed, line index) falls under val_fraction, so the split is
// deterministic and spread over the whole corpus.
#include <cstdint>
#include <string>

#include "data/tokenizer.h"

namespace ggtrain::data {

struct CorpusStats {
  int64_t documents = 0, train_tokens = 0, val_tokens = 0, bytes = 0;
};

CorpusStats prepare_corpus(const std::string& text_path, const Tokenizer& tok,
                           double val_fraction, uint64_t seed, const std::string& train_out,
                           const std::string& val_out);

}  // namespace ggtrain::data
