#pragma once
// Preparation options for tests: batches of 2000 bytes (many batches, so
// shards close mid-corpus and mid-source) and no progress output.
#include <cstdint>
#include <string>
#include <vector>

#include "data/prepare/prepare.h"

namespace ggtrain::test_support {

inline data::PrepareOptions small_batch_options(const std::vector<std::string>& corpus, double val_fraction,
                                                int64_t shard_tokens) {
  data::PrepareOptions o;
  o.corpus = corpus;
  o.val_fraction = val_fraction;
  o.shard_tokens = shard_tokens;
  o.batch_bytes = 2000;
  o.quiet = true;
  return o;
}

}  // namespace ggtrain::test_support
