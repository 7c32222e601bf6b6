#pragma once
// Picks the next token from a row of logits the way llama.cpp's sampler chain
// does (src/llama-sampler.cpp; the order of llama-cli's defaults and of
// node-llama-cpp): repeat penalty, top-k, top-p, min-p (the last two on the
// untempered distribution), temperature, then a draw from std::mt19937
// seeded with the seed, with llama.cpp's float arithmetic and candidate
// order at every step, so that the same logits and seed give llama.cpp's
// tokens. Temperature <= 0 is greedy: the highest logit after the penalty.
#include <cstdint>
#include <random>
#include <vector>

namespace ggtrain::infer {

struct SamplerConfig {
  double temperature = 0.8;
  int64_t top_k = 40;  // 0: off
  double top_p = 0.95;  // 1: off
  double min_p = 0.05;  // 0: off
  double repeat_penalty = 1.0;  // 1: off
  int64_t repeat_last_n = 64;  // tokens of history the penalty looks at; -1: all
};

// llama.cpp's dist sampler's generator: std::mt19937 seeded with the
// 32-bit seed (llama_sampler_init_dist).
inline std::mt19937 sampler_rng(uint64_t seed) { return std::mt19937(uint32_t(seed)); }

// `history`: the tokens so far (prompt and generated), for the penalty.
int32_t sample_token(const float* logits, int64_t vocab, const SamplerConfig& cfg, std::mt19937& rng,
                     const std::vector<int32_t>& history = {});

}  // namespace ggtrain::infer
