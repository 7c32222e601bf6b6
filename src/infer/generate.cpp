#include "infer/generate.h"

#include <algorithm>

#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::infer {

namespace {

// The prompt into sequence 0, what its cache shares with it kept when the
// control says so; g gets the reused count and the time.
void eval_prompt(Decoder& dec, const std::vector<int32_t>& prompt, const GenerateControl& control, Generation& g) {
  if (prompt.empty()) fail("generate: the prompt is empty");
  if (int64_t(prompt.size()) > dec.n_ctx())
    fail("generate: the prompt's {} tokens exceed the context of {}", prompt.size(), dec.n_ctx());
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
  g.prompt_seconds = now_seconds() - t0;
}

bool is_stop(const std::vector<int32_t>& stop_tokens, int32_t id) {
  return std::find(stop_tokens.begin(), stop_tokens.end(), id) != stop_tokens.end();
}

}  // namespace

Generation generate(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n, const SamplerConfig& sampler,
                    uint64_t seed, const std::vector<int32_t>& stop_tokens,
                    const std::function<void(int32_t)>& on_token, const GenerateControl& control) {
  Generation g;
  eval_prompt(dec, prompt, control, g);
  const double t1 = now_seconds();
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
    g.stopped = is_stop(stop_tokens, next);
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

std::vector<Generation> generate_group(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n,
                                       const SamplerConfig& sampler, const std::vector<uint64_t>& seeds,
                                       const std::vector<int32_t>& stop_tokens, const GenerateControl& control) {
  const int64_t G = int64_t(seeds.size()), V = dec.config().vocab;
  if (G == 0) return {};
  dec.set_sequences(G);
  std::vector<Generation> out(static_cast<size_t>(G));
  eval_prompt(dec, prompt, control, out[0]);
  for (int64_t i = 1; i < G; ++i) dec.copy_sequence(0, i);
  const double t1 = now_seconds();
  std::vector<std::vector<int32_t>> history(static_cast<size_t>(G), prompt);
  std::vector<std::mt19937> rng;
  for (uint64_t s : seeds) rng.push_back(sampler_rng(s));
  // The prompt's last logits start every reply; later, row j of the batch's.
  const std::vector<float> first(dec.logits(), dec.logits() + V);
  std::vector<int64_t> active(static_cast<size_t>(G)), next_active;
  for (int64_t i = 0; i < G; ++i) active[size_t(i)] = i;
  if (n == 0) active.clear();
  std::vector<int32_t> tokens;
  for (int64_t step = 0; !active.empty(); ++step) {
    if (control.cancelled && control.cancelled()) {
      for (int64_t i : active) out[size_t(i)].cancelled = true;
      break;
    }
    next_active.clear();
    tokens.clear();
    for (size_t j = 0; j < active.size(); ++j) {
      const int64_t i = active[j];
      Generation& g = out[size_t(i)];
      const float* z = step == 0 ? first.data() : dec.logits() + int64_t(j) * V;
      const int32_t next = sample_token(z, V, sampler, rng[size_t(i)], history[size_t(i)]);
      g.tokens.push_back(next);
      history[size_t(i)].push_back(next);
      g.stopped = is_stop(stop_tokens, next);
      if (g.stopped || step + 1 == n) continue;
      if (dec.position(i) >= dec.n_ctx()) {
        g.context_full = true;
        continue;
      }
      next_active.push_back(i);
      tokens.push_back(next);
    }
    active.swap(next_active);
    if (!active.empty()) dec.eval_batch(tokens.data(), active.data(), int64_t(active.size()));
  }
  const double decode_seconds = now_seconds() - t1;
  for (Generation& g : out) {
    g.reused_tokens = out[0].reused_tokens;
    g.prompt_seconds = out[0].prompt_seconds;
    g.decode_seconds = decode_seconds;
  }
  return out;
}

}  // namespace ggtrain::infer
