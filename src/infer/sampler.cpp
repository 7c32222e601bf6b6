#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace ggtrain::infer {

namespace {

// llama.cpp's repeat penalty: logits of recent tokens are divided by the
// penalty when positive, multiplied when negative (each token once).
void apply_repeat_penalty(std::vector<float>& z, const SamplerConfig& cfg,
                          const std::vector<int32_t>& history) {
  if (cfg.repeat_penalty == 1.0 || cfg.repeat_last_n == 0) return;
  const size_t n = cfg.repeat_last_n < 0 ? history.size()
                                         : std::min(history.size(), size_t(cfg.repeat_last_n));
  std::unordered_set<int32_t> seen(history.end() - long(n), history.end());
  for (int32_t t : seen) {
    if (t < 0 || size_t(t) >= z.size()) continue;
    z[size_t(t)] = z[size_t(t)] > 0 ? float(z[size_t(t)] / cfg.repeat_penalty)
                                    : float(z[size_t(t)] * cfg.repeat_penalty);
  }
}

}  // namespace

int32_t sample_token(const float* logits, int64_t vocab, const SamplerConfig& cfg, Rng& rng,
                     const std::vector<int32_t>& history) {
  std::vector<float> z(logits, logits + vocab);
  apply_repeat_penalty(z, cfg, history);
  if (cfg.temperature <= 0) return int32_t(std::max_element(z.begin(), z.end()) - z.begin());

  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return z[size_t(a)] != z[size_t(b)] ? z[size_t(a)] > z[size_t(b)] : a < b; };
  size_t keep = ids.size();
  if (cfg.top_k > 0 && size_t(cfg.top_k) < keep) keep = size_t(cfg.top_k);
  std::partial_sort(ids.begin(), ids.begin() + long(keep), ids.end(), by_logit);
  ids.resize(keep);

  // top-p and min-p on the distribution before temperature
  std::vector<double> p(keep);
  const double maxl = z[size_t(ids[0])];
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp(double(z[size_t(ids[i])]) - maxl);
  for (auto& x : p) x /= sum;
  size_t n = keep;
  if (cfg.top_p < 1) {
    double cum = 0;
    for (size_t i = 0; i < n; ++i)
      if ((cum += p[i]) >= cfg.top_p) {
        n = i + 1;
        break;
      }
  }
  if (cfg.min_p > 0)
    while (n > 1 && p[n - 1] < cfg.min_p * p[0]) --n;

  // temperature, then draw
  std::vector<double> w(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i)
    total += w[i] = std::exp((double(z[size_t(ids[i])]) - maxl) / cfg.temperature);
  double r = rng.uniform() * total;
  for (size_t i = 0; i < n; ++i)
    if ((r -= w[i]) < 0) return ids[i];
  return ids[n - 1];
}

}  // namespace ggtrain::infer
