#pragma once
// Preparation options for tests: batches of 2000 bytes (many batches, so
// shards close mid-corpus and mid-source) and no progress output.
#include <cstdint>
#include <string>
#include <vector>

#include "corpus/prepare/prepare.h"

namespace ggtrain::test_support {

inline corpus::PrepareOptions small_batch_options(const std::vector<std::string>& corpus, double val_fraction,
                                                  int64_t shard_tokens) {
  corpus::PrepareOptions o;
  o.corpus = corpus;
  o.val_fraction = val_fraction;
  o.shard_tokens = shard_tokens;
  o.batch_bytes = 2000;
  o.quiet = true;
  return o;
}

}  // namespace ggtrain::test_support
