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

// The head runs only on rows with a target (a masked prompt costs no head
// GEMM), gathering them into chunks. Against the path that runs every row
// through the head in place (forward_scores, then backward_weighted with
// 1/count on the counted rows and 0 elsewhere): the same loss, per-token
// losses and gradients, in double to 1e-12 and in float to a measured limit.
// Chunks of 3 rows so gathered chunks mix runs of rows; a step with every
// target first, so stale gradients of the skipped rows would show (leaving
// out their zeroing: gradients 0.18 of the largest off, both types).
template <typename T>
void expect_targeted_head_matches_every_row(double limit) {
  auto c = small_config();
  model::ModelOptions o;
  o.logit_chunk_rows = 3;
  const int64_t B = 2, T_ = 16, BT = B * T_;
  model::Transformer<T> skipping(c, B, T_, {}, o), every(c, B, T_, {}, o);
  model::Transformer<float> init(c, B, T_);
  model::init_params(c, init.layout(), init.params(), 77);
  std::copy(init.params(), init.params() + init.n_params(), skipping.params());
  std::copy(init.params(), init.params() + init.n_params(), every.params());
  const auto in = pattern_tokens(BT, c.vocab, 0), all = pattern_tokens(BT, c.vocab, 5);
  auto masked = all;
  for (int64_t i = 0; i < BT; ++i)  // a prompt of 5 in each row, and scattered rows
    if (i % T_ < 5 || i % 7 == 3) masked[size_t(i)] = -1;
  skipping.forward(in.data(), all.data());
  skipping.backward();  // dirties the head's buffers
  skipping.zero_grad();
  const T loss = skipping.forward(in.data(), masked.data());
  skipping.backward();

  every.forward_scores(in.data(), masked.data());
  const int64_t counted = std::count_if(masked.begin(), masked.end(), [](int32_t t) { return t >= 0; });
  std::vector<T> d(static_cast<size_t>(BT));
  double sum = 0;
  for (int64_t i = 0; i < BT; ++i) {
    d[size_t(i)] = masked[size_t(i)] >= 0 ? T(1) / T(counted) : T(0);
    sum += double(every.token_losses()[i]);
  }
  every.zero_grad();
  every.backward_weighted(d.data());
  ASSERT_EQ(skipping.counted_targets(), counted);
  EXPECT_NEAR(double(loss), sum / double(counted), limit * sum / double(counted));
  const auto losses = compare(skipping.token_losses(), every.token_losses(), size_t(BT));
  const auto grads = compare(skipping.grads(), every.grads(), size_t(every.n_trainable()));
  EXPECT_TRUE(within_rel_to_max(losses, limit)) << "per-token losses";
  EXPECT_TRUE(within_rel_to_max(grads, limit)) << "gradients";
  for (int64_t i = 0; i < BT; ++i) {
    if (masked[size_t(i)] < 0) {
      EXPECT_EQ(skipping.token_losses()[i], T(0)) << "row " << i;
    }
  }
  std::printf("head on targeted rows vs every row (%s): loss %.2e, gradients %.2e (of max)\n",
              sizeof(T) == 8 ? "double" : "float", std::fabs(double(loss) - sum / double(counted)), grads.rel_to_max());
}

TEST(Training, HeadSkipsRowsWithoutTargetDouble) { expect_targeted_head_matches_every_row<double>(1e-12); }
// Measured in float: loss and gradients within 2e-7 (summation order); limit 1e-5.
TEST(Training, HeadSkipsRowsWithoutTargetFloat) { expect_targeted_head_matches_every_row<float>(1e-5); }
