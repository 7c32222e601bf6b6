#pragma once
// Picks the next token from a row of logits: greedy at temperature 0, else
// temperature, top-k, top-p (nucleus) and min-p filtering, then a draw.
#include <cstdint>

#include "util/rng.h"

namespace ggtrain::infer {

struct SamplerConfig {
  double temperature = 0.8;
  int64_t top_k = 40;       // 0: off
  double top_p = 0.95;      // 1: off
  double min_p = 0.05;      // 0: off
};

int32_t sample_token(const float* logits, int64_t vocab, const SamplerConfig& cfg, Rng& rng);

}  // namespace ggtrain::infer
