// infer/sampler: greedy, top-k, repeat penalty, temperature, top-p and
// min-p, each on logits whose answer is known.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "infer/sampler.h"

using namespace ggtrain;

TEST(Sampler, GreedyTopKAndPenalty) {
  std::vector<float> z{0.5f, 2.0f, -1.0f, 1.9f};
  auto rng = infer::sampler_rng(1);
  infer::SamplerConfig greedy;
  greedy.temperature = 0;
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng), 1);
  infer::SamplerConfig top1;
  top1.top_k = 1;
  top1.temperature = 5;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(infer::sample_token(z.data(), 4, top1, rng), 1);
  // Repeat penalty 2: logit 2.0 of a recent token becomes 1.0 < 1.9.
  greedy.repeat_penalty = 2.0;
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng, {1}), 3);
  // All penalised: 2.0 -> 1.0, 1.9 -> 0.95, and -1 -> -2 (multiplied when negative).
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng, {2, 1, 3}), 1);
  z = {0.5f, -0.6f, -1.0f, -0.7f};
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng, {0}), 0);  // 0.25 still highest
  EXPECT_EQ(infer::sample_token(z.data(), 4, greedy, rng, {1}), 0);
  z = {-0.5f, -0.6f};
  EXPECT_EQ(infer::sample_token(z.data(), 2, greedy, rng, {0}), 1);  // -0.5 -> -1.0
}

TEST(Sampler, TemperatureOneDrawsFromTheSoftmax) {
  std::vector<float> z{0.0f, float(std::log(3.0))};
  infer::SamplerConfig s;
  s.temperature = 1;
  s.top_k = 0;
  s.top_p = 1;
  s.min_p = 0;
  auto rng = infer::sampler_rng(7);
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += infer::sample_token(z.data(), 2, s, rng);
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
  auto a = infer::sampler_rng(9), b = infer::sampler_rng(9);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(infer::sample_token(z.data(), 2, s, a), infer::sample_token(z.data(), 2, s, b));
}

// top-p and min-p cut the distribution before temperature (a temperature
// of 1000 then makes what is left nearly uniform): probabilities 0.5, 0.3,
// 0.15, 0.05 keep {0, 1} at top-p 0.75 and {0, 1, 2} at min-p 0.25 (>= 0.125).
TEST(Sampler, TopPAndMinPCutBeforeTemperature) {
  std::vector<float> z;
  for (double p : {0.5, 0.3, 0.15, 0.05}) z.push_back(float(std::log(p)));
  auto seen_with = [&](double top_p, double min_p) {
    infer::SamplerConfig s;
    s.temperature = 1000;
    s.top_k = 0;
    s.top_p = top_p;
    s.min_p = min_p;
    auto rng = infer::sampler_rng(3);
    std::vector<int> seen(4, 0);
    for (int i = 0; i < 2000; ++i) ++seen[size_t(infer::sample_token(z.data(), 4, s, rng))];
    return seen;
  };
  const auto p = seen_with(0.75, 0);
  EXPECT_GT(p[0], 800);
  EXPECT_GT(p[1], 800);
  EXPECT_EQ(p[2] + p[3], 0);
  const auto m = seen_with(1, 0.25);
  EXPECT_GT(m[0], 500);
  EXPECT_GT(m[1], 500);
  EXPECT_GT(m[2], 500);
  EXPECT_EQ(m[3], 0);
  const auto both = seen_with(0.75, 0.25);  // min-p on what top-p left
  EXPECT_EQ(both[2] + both[3], 0);
}
