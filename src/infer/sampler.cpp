#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace ggtrain::infer {

namespace {

// llama_token_data_array: candidates in the order the samplers leave them.
struct Candidates {
  struct Token {
    int32_t id;
    float logit, p;
  };
  std::vector<Token> data;
  bool sorted = false;  // by logit, descending

  void sort_first(size_t k) {  // llama_token_data_array_partial_sort_inplace
    std::partial_sort(data.begin(), data.begin() + long(k), data.end(),
                      [](const Token& a, const Token& b) { return a.logit > b.logit; });
  }
  float max_logit() const {
    float m = data[0].logit;
    if (!sorted)
      for (const Token& t : data) m = std::max(m, t.logit);
    return m;
  }
};

// llama_sampler_penalties (repeat penalty only): each token of the window
// once, divided when its logit is positive, multiplied otherwise.
void penalize(Candidates& c, const SamplerConfig& cfg, const std::vector<int32_t>& history) {
  if (cfg.repeat_last_n == 0 || cfg.repeat_penalty == 1.0) return;
  const size_t n = cfg.repeat_last_n < 0 ? history.size() : std::min(history.size(), size_t(cfg.repeat_last_n));
  std::unordered_map<int32_t, int> count;
  for (auto it = history.end() - long(n); it != history.end(); ++it) ++count[*it];
  const float penalty = float(cfg.repeat_penalty);
  for (auto& t : c.data)
    if (count.count(t.id)) t.logit = t.logit <= 0 ? t.logit * penalty : t.logit / penalty;
  c.sorted = false;
}

void top_k(Candidates& c, int64_t k) {  // llama_sampler_top_k_impl
  if (k <= 0) return;
  const size_t keep = std::min(size_t(k), c.data.size());
  if (!c.sorted) c.sort_first(keep);
  c.data.resize(keep);
  c.sorted = true;
}

// llama_sampler_top_p: probabilities over the candidates in their order
// (float), then the shortest sorted prefix whose probabilities reach p.
void top_p(Candidates& c, double p_value) {
  const float p = float(p_value);
  if (p >= 1.0f) return;
  const float max_l = c.max_logit();
  float cum = 0;
  for (auto& t : c.data) cum += t.p = std::exp(t.logit - max_l);
  for (auto& t : c.data) t.p /= cum;
  if (!c.sorted) c.sort_first(c.data.size());
  c.sorted = true;
  float run = 0;
  for (size_t i = 0; i < c.data.size(); ++i)
    if ((run += c.data[i].p) >= p) {
      c.data.resize(i + 1);
      return;
    }
}

// llama_sampler_min_p: logits at least max + log(p); unsorted candidates
// keep their order.
void min_p(Candidates& c, double p_value) {
  const float p = float(p_value);
  if (p <= 0.0f || c.data.empty()) return;
  const float min_logit = c.max_logit() + std::log(p);
  if (!c.sorted) {
    std::erase_if(c.data, [&](const Candidates::Token& t) { return t.logit < min_logit; });
    return;
  }
  size_t i = 1;
  while (i < c.data.size() && c.data[i].logit >= min_logit) ++i;
  c.data.resize(i);
}

// llama_sampler_dist: one uniform double per draw, softmax in float, the
// first candidate whose running sum (double) reaches the target.
int32_t draw(Candidates& c, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(0.0f, 1.0f);
  if (c.data.size() == 1) {
    dist(rng);  // llama.cpp draws here too
    return c.data[0].id;
  }
  const float max_l = c.max_logit();
  double sum = 0;
  for (auto& t : c.data) sum += t.p = std::exp(t.logit - max_l);
  const double target = sum * dist(rng);
  double run = 0;
  for (const auto& t : c.data)
    if ((run += t.p) >= target) return t.id;
  return c.data.back().id;
}

}  // namespace

int32_t sample_token(const float* logits, int64_t vocab, const SamplerConfig& cfg, std::mt19937& rng,
                     const std::vector<int32_t>& history) {
  Candidates c;
  c.data.reserve(size_t(vocab));
  for (int64_t i = 0; i < vocab; ++i) c.data.push_back({int32_t(i), logits[i], 0.0f});
  penalize(c, cfg, history);
  if (cfg.temperature <= 0) {  // greedy: the first highest logit
    return std::max_element(c.data.begin(), c.data.end(),
                            [](const auto& a, const auto& b) { return a.logit < b.logit; })
        ->id;
  }
  top_k(c, cfg.top_k);
  top_p(c, cfg.top_p);
  min_p(c, cfg.min_p);
  const float temp = float(cfg.temperature);
  for (auto& t : c.data) t.logit /= temp;
  return draw(c, rng);
}

}  // namespace ggtrain::infer
