// infer/generate: the generation loop against the full forward pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "infer/decoder.h"
#include "infer/generate.h"
#include "infer/sampler.h"
#include "support/random_model.h"
#include "support/spread_tokens.h"
#include "support/temp_dir.h"

using namespace ggtrain;
using test_support::small_model_config;
using test_support::spread_tokens;
using test_support::TempDir;
using test_support::write_random_model;

// The generation loop: the prompt once, then one token at a time; it stops
// after the stop token, at n tokens, or when the context is full, and the
// greedy continuation is the argmax of the full forward pass at each step.
TEST(Generate, GreedyFollowsTheFullForwardAndStops) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  const auto p = write_random_model(c, tmp / "m.gguf");
  infer::Decoder dec(c, p.data(), nullptr, 20);
  infer::SamplerConfig greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = spread_tokens(5, c.vocab);
  std::vector<int32_t> seen;
  const auto g = infer::generate(dec, prompt, 8, greedy, 1, {}, [&](int32_t t) { seen.push_back(t); });
  ASSERT_EQ(g.tokens.size(), 8u);
  EXPECT_EQ(seen, g.tokens);
  std::vector<int32_t> ctx = prompt;
  for (int32_t t : g.tokens) {
    infer::Decoder full(c, p.data(), nullptr, 20);
    full.eval(ctx.data(), int64_t(ctx.size()), false);
    EXPECT_EQ(t, int32_t(std::max_element(full.logits(), full.logits() + c.vocab) - full.logits()));
    ctx.push_back(t);
  }
  // Stops after the stop token (kept), and when the context (20) is full.
  const auto stop_at = std::find(g.tokens.begin(), g.tokens.end(), g.tokens[2]);  // its first time
  EXPECT_EQ(infer::generate(dec, prompt, 8, greedy, 1, {g.tokens[2]}).tokens,
            std::vector<int32_t>(g.tokens.begin(), stop_at + 1));
  EXPECT_EQ(infer::generate(dec, prompt, 100, greedy, 1, {}).tokens.size(), size_t(20 - 5 + 1));
}
