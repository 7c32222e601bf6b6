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
  bool stopped = false;  // ended on a stop token
  bool cancelled = false;  // ended because GenerateControl::cancelled said so
  bool context_full = false;  // ended because the cache held n_ctx tokens
  int64_t reused_tokens = 0;  // of the prompt, kept from the cache (GenerateControl::reuse_cache)
  double prompt_seconds = 0, decode_seconds = 0;
};

struct GenerateControl {
  // Keep what the decoder's cache holds of the prompt's start (a chat's
  // earlier turns) and compute only the rest; false: start from an empty
  // cache (the weights may have changed since, as between training samples).
  bool reuse_cache = false;
  // Asked before each new token; true ends the generation (Ctrl-C).
  std::function<bool()> cancelled;
};

// Continues `prompt` by up to n tokens (n < 0: no limit), stopping after any of
// `stop_tokens`, when the context is full, or when cancelled. on_token
// (optional) sees each token as it is drawn.
Generation generate(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n, const SamplerConfig& sampler,
                    uint64_t seed, const std::vector<int32_t>& stop_tokens,
                    const std::function<void(int32_t)>& on_token = {}, const GenerateControl& control = {});

// Replies to one prompt decoded together, one per seed: the prompt is
// computed once into the decoder's sequence 0 (GenerateControl::reuse_cache
// as for generate()) and copied to one sequence per reply; then each step
// runs every unfinished reply's next token in one Decoder::eval_batch.
// Reply i draws with seeds[i] and stops as generate() would; greedy
// replies are generate()'s. The decoder keeps seeds.size() sequences.
std::vector<Generation> generate_group(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n,
                                       const SamplerConfig& sampler, const std::vector<uint64_t>& seeds,
                                       const std::vector<int32_t>& stop_tokens, const GenerateControl& control = {});

}  // namespace ggtrain::infer
