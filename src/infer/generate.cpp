#include "infer/generate.h"

#include <algorithm>

#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::infer {

Generation generate(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n, const SamplerConfig& sampler,
                    uint64_t seed, const std::vector<int32_t>& stop_tokens,
                    const std::function<void(int32_t)>& on_token, const GenerateControl& control) {
  if (prompt.empty()) fail("generate: the prompt is empty");
  if (int64_t(prompt.size()) > dec.n_ctx())
    fail("generate: the prompt's {} tokens exceed the context of {}", prompt.size(), dec.n_ctx());
  Generation g;
  // At least the last prompt token is computed again: its logits start the reply.
  const auto& cached = dec.cached_tokens();
  const int64_t shared =
      control.reuse_cache
          ? std::mismatch(cached.begin(), cached.end(), prompt.begin(), prompt.end()).first - cached.begin()
          : 0;
  dec.truncate(std::min(shared, int64_t(prompt.size()) - 1));
  g.reused_tokens = dec.position();
  const double t0 = now_seconds();
  dec.eval(prompt.data() + dec.position(), int64_t(prompt.size()) - dec.position(), false);
  const double t1 = now_seconds();
  g.prompt_seconds = t1 - t0;
  std::vector<int32_t> history = prompt;
  std::mt19937 rng = sampler_rng(seed);
  for (int64_t i = 0; n < 0 || i < n; ++i) {
    if (control.cancelled && control.cancelled()) {
      g.cancelled = true;
      break;
    }
    const int32_t next = sample_token(dec.logits(), dec.config().vocab, sampler, rng, history);
    g.tokens.push_back(next);
    history.push_back(next);
    if (on_token) on_token(next);
    g.stopped = std::find(stop_tokens.begin(), stop_tokens.end(), next) != stop_tokens.end();
    if (g.stopped || i + 1 == n) break;
    if (dec.position() >= dec.n_ctx()) {
      g.context_full = true;
      break;
    }
    dec.eval(&next, 1, false);
  }
  g.decode_seconds = now_seconds() - t1;
  return g;
}

}  // namespace ggtrain::infer
