#include "infer/generator.h"

#include <algorithm>

#include "util/error.h"

namespace ggtrain::infer {

namespace {
model::ModelOptions options_holding(const model::QuantizedBase* quantized) {
  model::ModelOptions o;
  o.quantized = quantized;
  return o;
}
}  // namespace

Generator::Generator(const model::LlamaConfig& cfg, const float* params, const model::QuantizedBase* quantized)
    : model_(cfg, 1, cfg.ctx, model::ParamLayout(cfg).names(), options_holding(quantized)) {
  std::copy(params, params + model_.n_params(), model_.params());
}

std::vector<float> Generator::logits(const std::vector<int32_t>& tokens) {
  const int64_t T = model_.seq_len(), V = model_.config().vocab;
  if (tokens.empty() || int64_t(tokens.size()) > T)
    fail("generate: {} tokens do not fit the context of {}", tokens.size(), T);
  std::vector<int32_t> window(size_t(T), 0);  // causal: padding after the prompt is never seen
  std::copy(tokens.begin(), tokens.end(), window.begin());
  model_.forward(window.data(), nullptr);
  return {model_.logits(), model_.logits() + int64_t(tokens.size()) * V};
}

std::vector<int32_t> Generator::generate(const std::vector<int32_t>& prompt, int64_t n,
                                         const SamplerConfig& sampler, uint64_t seed,
                                         int32_t stop_token,
                                         const std::function<void(int32_t)>& on_token) {
  const int64_t T = model_.seq_len(), V = model_.config().vocab;
  std::vector<int32_t> ctx = prompt, out;
  Rng rng(seed);
  std::vector<int32_t> window(size_t(T), 0);
  for (int64_t i = 0; i < n && int64_t(ctx.size()) < T; ++i) {
    std::copy(ctx.begin(), ctx.end(), window.begin());
    model_.forward(window.data(), nullptr);
    const float* row = model_.logits() + (int64_t(ctx.size()) - 1) * V;
    int32_t next = sample_token(row, V, sampler, rng);
    ctx.push_back(next);
    out.push_back(next);
    if (on_token) on_token(next);
    if (next == stop_token) break;
  }
  return out;
}

}  // namespace ggtrain::infer
