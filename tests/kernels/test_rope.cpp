// kernels/rope: the backward against central finite differences in double
// (L = sum(out * probe) for a random probe), and the rotation itself.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/rope.h"
#include "support/compare.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
using ggtrain::test_support::dot;
using ggtrain::test_support::expect_grad_matches_fd;
using ggtrain::test_support::random_vector;
using Vec = std::vector<double>;

TEST(LayerFd, Rope) {
  const int64_t B = 2, T = 5, H = 3, hd = 6;
  Vec cs(T * hd / 2), sn(T * hd / 2);
  rope_tables(cs.data(), sn.data(), T, hd, 10000.0);
  Vec x = random_vector(B * T * H * hd, 9), probe = random_vector(B * T * H * hd, 10);
  auto loss = [&] {
    Vec y = x;
    rope_forward(y.data(), cs.data(), sn.data(), B, T, H, hd);
    return dot(y, probe);
  };
  Vec dx = probe;
  rope_backward(dx.data(), cs.data(), sn.data(), B, T, H, hd);
  expect_grad_matches_fd(x, dx, loss, "rope dx");
}

TEST(LayerFd, RopeRotatesAdjacentPairsByPositionAngle) {
  // Position 3, pair i=1 of a head of 4: angle 3 * 10000^(-2/4) = 0.03.
  const int64_t T = 4, hd = 4;
  Vec cs(T * 2), sn(T * 2);
  rope_tables(cs.data(), sn.data(), T, hd, 10000.0);
  Vec x(T * hd, 0.0);
  x[3 * hd + 2] = 1.0;  // (x[2], x[3]) = (1, 0) at position 3
  rope_forward(x.data(), cs.data(), sn.data(), 1, T, 1, hd);
  EXPECT_NEAR(x[3 * hd + 2], std::cos(0.03), 1e-15);
  EXPECT_NEAR(x[3 * hd + 3], std::sin(0.03), 1e-15);
  EXPECT_EQ(x[3 * hd + 0], 0.0);
}

// Partial RoPE: the first n_rot dimensions of each head turn (as a rotation:
// norms kept), the rest pass unchanged; backward undoes forward.
TEST(Rope, PartialRotatesTheFirstDimensionsOnly) {
  const int64_t T = 5, H = 3, hd = 10, n_rot = 6;
  for (bool halves : {false, true}) {
    Vec cs(T * n_rot / 2), sn(T * n_rot / 2);
    rope_tables(cs.data(), sn.data(), T, n_rot, 100.0);
    Vec x(size_t(T * H * hd));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7 * double(i)) + 0.1;
    Vec y = x;
    rope_forward(y.data(), cs.data(), sn.data(), 1, T, H, hd, halves, n_rot);
    bool moved = false;
    for (int64_t r = 0; r < T * H; ++r) {
      double nx = 0, ny = 0;
      for (int64_t i = 0; i < hd; ++i) {
        const size_t at = size_t(r * hd + i);
        if (i >= n_rot) EXPECT_EQ(y[at], x[at]) << "dimension " << i << " is past n_rot";
        else moved = moved || std::fabs(y[at] - x[at]) > 1e-6, nx += x[at] * x[at], ny += y[at] * y[at];
      }
      EXPECT_NEAR(nx, ny, 1e-12);
    }
    EXPECT_TRUE(moved);
    rope_backward(y.data(), cs.data(), sn.data(), 1, T, H, hd, halves, n_rot);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-12);
  }
}
