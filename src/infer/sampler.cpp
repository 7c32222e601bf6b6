#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace ggtrain::infer {

int32_t sample_token(const float* logits, int64_t vocab, const SamplerConfig& cfg, Rng& rng) {
  if (cfg.temperature <= 0) return int32_t(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  // Stable order: by logit, ties by id, so sampling is reproducible.
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  size_t keep = ids.size();
  if (cfg.top_k > 0 && size_t(cfg.top_k) < keep) keep = size_t(cfg.top_k);
  std::partial_sort(ids.begin(), ids.begin() + long(keep), ids.end(), by_logit);
  ids.resize(keep);
  std::vector<double> p(keep);
  const double maxl = logits[ids[0]];
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((logits[ids[i]] - maxl) / cfg.temperature);
  for (auto& x : p) x /= sum;
  size_t n = keep;
  if (cfg.min_p > 0)
    while (n > 1 && p[n - 1] < cfg.min_p * p[0]) --n;
  if (cfg.top_p < 1) {
    double cum = 0;
    for (size_t i = 0; i < n; ++i) {
      cum += p[i];
      if (cum >= cfg.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += p[i];
  double r = rng.uniform() * total;
  for (size_t i = 0; i < n; ++i) {
    r -= p[i];
    if (r < 0) return ids[i];
  }
  return ids[n - 1];
}

}  // namespace ggtrain::infer
