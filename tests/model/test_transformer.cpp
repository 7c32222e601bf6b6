// The transformer trained by AdamW on a fixed batch: the loss falls, the
// same seed and threads give the same bits, and accumulated micro-batches
// give the gradient of one big batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/init.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "support/compare.h"
#include "support/tiny_llama.h"

using namespace ggtrain;
using test_support::compare;
using test_support::within_rel_to_max;

namespace {

model::Config small_config() { return test_support::tiny_llama(64); }

std::vector<int32_t> pattern_tokens(int64_t n, int64_t vocab, int64_t shift) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 5 + shift) % vocab);
  return t;
}

// A few AdamW steps on a fixed batch; returns the final parameters.
std::vector<float> train_steps(int steps, std::vector<float>* losses = nullptr) {
  auto c = small_config();
  model::Transformer<float> m(c, 2, 16);
  model::init_params(c, m.layout(), m.params(), 1234);
  const int64_t n = m.n_params();
  std::vector<float> mom(size_t(n), 0.f), var(size_t(n), 0.f);
  auto in = pattern_tokens(32, c.vocab, 0), tg = pattern_tokens(32, c.vocab, 5);
  for (int s = 1; s <= steps; ++s) {
    float loss = m.forward(in.data(), tg.data());
    if (losses) losses->push_back(loss);
    m.zero_grad();
    m.backward();
    float scale = optim::clip_scale(optim::grad_global_norm(m.grads(), n), 1.0);
    optim::adamw_step(m.layout(), m.params(), m.grads(), mom.data(), var.data(), s, 3e-3, {}, scale);
  }
  return {m.params(), m.params() + n};
}

}  // namespace

TEST(Training, LossFallsOnAFixedBatch) {
  std::vector<float> losses;
  train_steps(30, &losses);
  EXPECT_NEAR(losses.front(), std::log(64.0), 0.1);  // uniform at init
  EXPECT_LT(losses.back(), 0.5 * losses.front());
}

TEST(Training, SameSeedSameThreadsIsBitIdentical) {
  auto a = train_steps(3), b = train_steps(3);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(Training, GradientAccumulationEqualsOneBigBatch) {
  // Two micro-batches with loss_scale 1/2 give the gradient of the mean over both.
  auto c = small_config();
  model::Transformer<float> big(c, 2, 8), micro(c, 1, 8);
  model::init_params(c, big.layout(), big.params(), 7);
  std::copy(big.params(), big.params() + big.n_params(), micro.params());
  auto in = pattern_tokens(16, c.vocab, 1), tg = pattern_tokens(16, c.vocab, 2);
  big.forward(in.data(), tg.data());
  big.zero_grad();
  big.backward();
  micro.zero_grad();
  for (int k = 0; k < 2; ++k) {
    micro.forward(in.data() + 8 * k, tg.data() + 8 * k);
    micro.backward(0.5f);
  }
  EXPECT_TRUE(within_rel_to_max(compare(micro.grads(), big.grads(), size_t(big.n_params())), 1e-5))
      << "accumulated micro-batch gradients vs the big batch's";
}
