#pragma once
// Picks the next token from a row of logits, with llama.cpp's samplers in
// llama.cpp's default order: repeat penalty, top-k, top-p, min-p (the last
// two on the untempered distribution), temperature, then a seeded draw.
// Temperature <= 0 is greedy: the highest logit after the penalty.
#include <cstdint>
#include <vector>

#include "util/rng.h"

namespace ggtrain::infer {

struct SamplerConfig {
  double temperature = 0.8;
  int64_t top_k = 40;            // 0: off
  double top_p = 0.95;           // 1: off
  double min_p = 0.05;           // 0: off
  double repeat_penalty = 1.0;   // 1: off
  int64_t repeat_last_n = 64;    // tokens of history the penalty looks at
};

// `history`: the tokens so far (prompt and generated), for the penalty.
int32_t sample_token(const float* logits, int64_t vocab, const SamplerConfig& cfg, Rng& rng,
                     const std::vector<int32_t>& history = {});

}  // namespace ggtrain::infer
