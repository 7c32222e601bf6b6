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
  double prompt_seconds = 0, decode_seconds = 0;
};

// Continues `prompt` from the decoder's position 0 by up to n tokens,
// stopping after `stop_token` (if >= 0) or when the context is full.
// on_token (optional) sees each token as it is drawn.
Generation generate(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n, const SamplerConfig& sampler,
                    uint64_t seed, int32_t stop_token, const std::function<void(int32_t)>& on_token = {});

}  // namespace ggtrain::infer
