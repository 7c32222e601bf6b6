#pragma once
// Text generation from a model's weights. This first version re-runs the
// forward pass over the context window for every new token (no KV cache):
// simple and exact, fine for the short samples printed during training.
#include <cstdint>
#include <functional>
#include <vector>

#include "infer/sampler.h"
#include "model/llama.h"

namespace ggtrain::infer {

class Generator {
 public:
  // `params` laid out as the model of cfg (with `quantized`'s matrices held
  // aside, as in a LoRA run on a Q8_0 base). Every weight is frozen: no
  // gradient buffers.
  Generator(const model::LlamaConfig& cfg, const float* params, const model::QuantizedBase* quantized = nullptr);
  // Continues `prompt` by up to n tokens, stopping after `stop_token` (if >= 0)
  // or at the context length. on_token (optional) sees each id as it comes.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int64_t n,
                                const SamplerConfig& sampler, uint64_t seed, int32_t stop_token,
                                const std::function<void(int32_t)>& on_token = {});
  // Logits [n, vocab] of a prompt of n <= ctx tokens.
  std::vector<float> logits(const std::vector<int32_t>& tokens);

 private:
  model::LlamaModel<float> model_;
};

}  // namespace ggtrain::infer
