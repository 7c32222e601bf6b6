// kernels/cross_entropy: the backward against central finite differences in
// double, the fused form, and positions without a target.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "corpus/batch_loader.h"
#include "kernels/cross_entropy.h"
#include "support/compare.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
namespace corpus = ggtrain::corpus;
using ggtrain::test_support::compare;
using ggtrain::test_support::expect_grad_matches_fd;
using ggtrain::test_support::random_vector;
using ggtrain::test_support::within_abs;
using Vec = std::vector<double>;

TEST(LayerFd, CrossEntropy) {
  const int64_t N = 4, V = 7;
  std::vector<int32_t> targets{0, 6, 3, 3};
  Vec logits = random_vector(N * V, 23, 4.0);
  auto loss = [&] {
    Vec losses(N), lse(N);
    cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
    double s = 0;
    for (double l : losses) s += l;
    return s / double(N);
  };
  Vec losses(N), lse(N), d = logits;
  cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward_inplace(d.data(), lse.data(), targets.data(), N, V, 1.0 / double(N));
  expect_grad_matches_fd(logits, d, loss, "cross-entropy dlogits");
}

TEST(LayerFd, CrossEntropyFusedMatchesForwardThenBackward) {
  const int64_t N = 5, V = 37;
  std::vector<int32_t> targets{0, 36, 3, 3, 20};
  Vec logits = random_vector(N * V, 24, 6.0);
  Vec losses(N), lse(N), d = logits, fl(N), flse(N), fused = logits;
  cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward_inplace(d.data(), lse.data(), targets.data(), N, V, 0.25);
  cross_entropy_fused(fl.data(), flse.data(), fused.data(), targets.data(), N, V, 0.25);
  EXPECT_TRUE(within_abs(compare(fl, losses), 1e-14)) << "losses";
  EXPECT_TRUE(within_abs(compare(fused, d), 1e-15)) << "dlogits";
}

// A position whose target is kNoTarget adds no loss, its logits get no
// gradient, and the others' gradients are those of a batch without it.
TEST(LayerFd, CrossEntropySkipsPositionsWithoutTarget) {
  const int64_t N = 4, V = 9;
  const std::vector<int32_t> targets{2, corpus::kNoTarget, 8, corpus::kNoTarget};
  Vec logits = random_vector(N * V, 25, 4.0);
  Vec losses(N), lse(N), fused = logits, d = logits, fl(N), flse(N);
  cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward_inplace(d.data(), lse.data(), targets.data(), N, V, 0.5);
  cross_entropy_fused(fl.data(), flse.data(), fused.data(), targets.data(), N, V, 0.5);
  const std::vector<int32_t> kept{2, 8};
  Vec kept_logits(2 * V), kl(2), klse(2);
  std::copy(logits.begin(), logits.begin() + V, kept_logits.begin());
  std::copy(logits.begin() + 2 * V, logits.begin() + 3 * V, kept_logits.begin() + V);
  cross_entropy_fused(kl.data(), klse.data(), kept_logits.data(), kept.data(), 2, V, 0.5);
  for (int64_t n : {1, 3}) {
    EXPECT_EQ(losses[size_t(n)], 0.0);
    EXPECT_EQ(fl[size_t(n)], 0.0);
    for (int64_t i = 0; i < V; ++i) {
      EXPECT_EQ(d[size_t(n * V + i)], 0.0);
      EXPECT_EQ(fused[size_t(n * V + i)], 0.0);
    }
  }
  for (int64_t j = 0; j < 2; ++j) {
    const int64_t n = 2 * j;
    EXPECT_NEAR(fl[size_t(n)], kl[size_t(j)], 1e-14);
    for (int64_t i = 0; i < V; ++i) {
      EXPECT_NEAR(fused[size_t(n * V + i)], kept_logits[size_t(j * V + i)], 1e-15);
      EXPECT_NEAR(d[size_t(n * V + i)], kept_logits[size_t(j * V + i)], 1e-15);
    }
  }
}
