#pragma once
// The generation loop: the prompt as one batch through the decoder's KV
// cache, then one sampled token at a time (the repeat penalty sees the
// prompt and everything generated since). `ggtrain generate` and the
// samples printed during training both run it.
#include <cstdint>
#include <functional>
#include <vector>

#include "infer/decoder.h"
#include "infer/sampler.h"

namespace ggtrain::infer {

struct Generation {
  std::vector<int32_t> tokens;  // generated, the stop token included when it came
  bool stopped = false;         // ended on a stop token
  bool cancelled = false;       // ended because GenerateControl::cancelled said so
  bool context_full = false;    // ended because the cache held n_ctx tokens
  double prompt_seconds = 0, decode_seconds = 0;
};

struct GenerateControl {
  // The first `cached` tokens of the prompt are in the decoder's cache
  // already (a chat's earlier turns): only the rest is computed.
  int64_t cached = 0;
  // Asked before each new token; true ends the generation (Ctrl-C).
  std::function<bool()> cancelled;
};

// Continues `prompt` by up to n tokens (n < 0: no limit), stopping after any of
// `stop_tokens`, when the context is full, or when cancelled. on_token
// (optional) sees each token as it is drawn.
Generation generate(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n, const SamplerConfig& sampler,
                    uint64_t seed, const std::vector<int32_t>& stop_tokens,
                    const std::function<void(int32_t)>& on_token = {}, const GenerateControl& control = {});

}  // namespace ggtrain::infer
