// GRPO's loss against its formulas worked out here by hand (group
// advantages with torch.std's unbiased std, TRL's clipped surrogate and k3
// KL estimator), its gradient against central differences in double, and
// the identities the issue names: on a batch's first pass the ratio is 1,
// and rewards that do not differ within a group give zero advantage and
// zero gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "train/grpo_loss.h"
#include "util/error.h"

namespace ggtrain::train {
namespace {

// Rewards {1, 0, 0, 1}: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) =
// 0.5773502691896258; a biased std (0.5) would give +-0.9998 instead.
TEST(GrpoLoss, AdvantagesAreGroupNormalisedWithTheUnbiasedStd) {
  const std::vector<double> rewards{1, 0, 0, 1, 3, 3, 3, 3};
  const std::vector<double> a = group_advantages(rewards, 4, true);
  const double s = 0.5 / (0.5773502691896258 + 1e-4);
  const std::vector<double> want{s, -s, -s, s, 0, 0, 0, 0};
  ASSERT_EQ(a.size(), want.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i])) << i;
    EXPECT_NEAR(a[i], want[i], 1e-15) << i;
  }
  const std::vector<double> unscaled = group_advantages(rewards, 4, false);
  EXPECT_DOUBLE_EQ(unscaled[0], 0.5);
  EXPECT_DOUBLE_EQ(unscaled[1], -0.5);
  // TRL's reward_std: the groups' stds averaged.
  EXPECT_NEAR(mean_group_std(rewards, 4), 0.5773502691896258 / 2, 1e-15);
}

TEST(GrpoLoss, GroupsOfOneOrRaggedGroupsAreRefused) {
  EXPECT_THROW(group_advantages({1, 2, 3}, 2, true), Error);
  EXPECT_THROW(group_advantages({1, 2}, 1, true), Error);
}

// On a batch's first pass old_logp = logp: r = 1, the loss is -A and its
// gradient -A; nothing is clipped.
TEST(GrpoLoss, FirstPassRatioIsOne) {
  const GrpoParams p;
  for (double a : {-1.3, 0.0, 0.7}) {
    const GrpoToken t = grpo_token(-2.5, -2.5, 0, a, p);
    EXPECT_EQ(t.loss, -a);
    EXPECT_EQ(t.d_logp, -a);
    EXPECT_FALSE(t.clipped);
    EXPECT_EQ(t.kl, 0.0);
  }
}

// Beyond the clip range on the side the advantage favours: the loss is the
// clipped surrogate, the gradient zero. On the other side the unclipped
// branch is the min and keeps its gradient.
TEST(GrpoLoss, ClippedTokensCarryNoPolicyGradient) {
  GrpoParams p;
  p.epsilon_low = 0.2;
  p.epsilon_high = 0.28;
  const double up = std::log(1.5), down = std::log(0.5);
  GrpoToken t = grpo_token(up, 0, 0, 2.0, p);  // r = 1.5 > 1.28, A > 0
  EXPECT_TRUE(t.clipped);
  EXPECT_NEAR(t.loss, -1.28 * 2.0, 1e-15);
  EXPECT_EQ(t.d_logp, 0.0);
  t = grpo_token(down, 0, 0, -2.0, p);  // r = 0.5 < 0.8, A < 0
  EXPECT_TRUE(t.clipped);
  EXPECT_NEAR(t.loss, 0.8 * 2.0, 1e-15);
  EXPECT_EQ(t.d_logp, 0.0);
  t = grpo_token(up, 0, 0, -2.0, p);  // r = 1.5, A < 0: min is r A
  EXPECT_FALSE(t.clipped);
  EXPECT_NEAR(t.loss, 1.5 * 2.0, 1e-14);
  EXPECT_NEAR(t.d_logp, 1.5 * 2.0, 1e-14);
}

// k3: exp(ref - logp) - (ref - logp) - 1, >= 0, zero when they agree.
TEST(GrpoLoss, KlPenaltyIsTheK3Estimator) {
  GrpoParams p;
  p.beta = 0.04;
  const double logp = -1.0, ref = -1.7;
  const GrpoToken t = grpo_token(logp, logp, ref, 0.5, p);
  const double d = ref - logp, k3 = std::exp(d) - d - 1;
  EXPECT_NEAR(t.kl, k3, 1e-15);
  EXPECT_GT(t.kl, 0.0);
  EXPECT_NEAR(t.loss, -0.5 + 0.04 * k3, 1e-15);
  EXPECT_EQ(grpo_token(logp, logp, logp, 0.5, p).kl, 0.0);
}

// d(loss)/d(logp) against central differences, old_logp fixed, across the
// clip regions, with and without the KL term.
TEST(GrpoLoss, GradientMatchesCentralDifferences) {
  GrpoParams p;
  p.epsilon_low = 0.2;
  p.epsilon_high = 0.28;
  for (double beta : {0.0, 0.1})
    for (double a : {-1.1, 0.6})
      for (double shift : {-0.5, -0.1, 0.05, 0.4}) {
        p.beta = beta;
        const double old_logp = -2.0, logp = old_logp + shift, ref = -2.3;
        auto f = [&](double x) { return grpo_token(x, old_logp, ref, a, p).loss; };
        const double h = 1e-6, fd = (f(logp + h) - f(logp - h)) / (2 * h);
        const double got = grpo_token(logp, old_logp, ref, a, p).d_logp;
        ASSERT_TRUE(std::isfinite(got) && std::isfinite(fd));
        EXPECT_NEAR(got, fd, 1e-7) << "beta " << beta << " A " << a << " shift " << shift;
      }
}

}  // namespace
}  // namespace ggtrain::train
