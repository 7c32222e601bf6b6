#include "infer/generate.h"

#include "util/clock.h"
#include "util/error.h"
#include "util/rng.h"

namespace ggtrain::infer {

Generation generate(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n, const SamplerConfig& sampler,
                    uint64_t seed, int32_t stop_token, const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) fail("generate: the prompt is empty");
  Generation g;
  dec.reset();
  const double t0 = now_seconds();
  dec.eval(prompt.data(), int64_t(prompt.size()), false);
  const double t1 = now_seconds();
  g.prompt_seconds = t1 - t0;
  std::vector<int32_t> history = prompt;
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t next = sample_token(dec.logits(), dec.config().vocab, sampler, rng, history);
    g.tokens.push_back(next);
    history.push_back(next);
    if (on_token) on_token(next);
    if (next == stop_token || i + 1 == n || dec.position() >= dec.n_ctx()) break;
    dec.eval(&next, 1, false);
  }
  g.decode_seconds = now_seconds() - t1;
  return g;
}

}  // namespace ggtrain::infer
