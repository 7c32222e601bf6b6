// kernels/rmsnorm: the backward against central finite differences in double
// (L = sum(out * probe) for a random probe), accumulation, and the fused
// residual add.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "support/compare.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
using ggtrain::test_support::compare;
using ggtrain::test_support::dot;
using ggtrain::test_support::expect_grad_matches_fd;
using ggtrain::test_support::random_vector;
using ggtrain::test_support::within_abs;
using Vec = std::vector<double>;

TEST(LayerFd, RmsNorm) {
  const int64_t N = 4, C = 9;
  const double eps = 1e-5;
  Vec x = random_vector(N * C, 4), w = random_vector(C, 5), probe = random_vector(N * C, 6);
  for (auto& v : w) v += 1.0;
  auto loss = [&] {
    Vec y(N * C), r(N);
    rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, eps);
    return dot(y, probe);
  };
  Vec y(N * C), r(N), dx(N * C, 0.0), dw(C, 0.0);
  rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, eps);
  rmsnorm_backward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), r.data(), N, C);
  expect_grad_matches_fd(x, dx, loss, "rmsnorm dx");
  expect_grad_matches_fd(w, dw, loss, "rmsnorm dw");
}

TEST(LayerFd, RmsNormBackwardAccumulates) {
  const int64_t N = 2, C = 4;
  Vec x = random_vector(N * C, 7), w(C, 1.0), probe = random_vector(N * C, 8);
  Vec y(N * C), r(N), dx(N * C, 0.0), dx2(N * C, 1.5), dw(C, 0.0), dw2(C, 0.0);
  rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, 1e-5);
  rmsnorm_backward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), r.data(), N, C);
  rmsnorm_backward(dx2.data(), dw2.data(), probe.data(), x.data(), w.data(), r.data(), N, C);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_DOUBLE_EQ(dx2[i], dx[i] + 1.5);
}

// The fused residual add + RMSNorm equals the two kernels one after the other.
TEST(LayerFd, ResidualRmsNormEqualsAddThenNorm) {
  const int64_t N = 5, C = 37;
  Vec x = random_vector(N * C, 51, 2.0), res = random_vector(N * C, 52), w = random_vector(C, 53);
  Vec sum(N * C), y(N * C), r(N), fx = x, fy(N * C), fr(N);
  residual_forward(sum.data(), x.data(), res.data(), N * C);
  rmsnorm_forward(y.data(), r.data(), sum.data(), w.data(), N, C, 1e-5);
  residual_rmsnorm_forward(fx.data(), fy.data(), fr.data(), res.data(), w.data(), N, C, 1e-5);
  EXPECT_TRUE(within_abs(compare(fx, sum), 0.0)) << "residual sum";
  EXPECT_TRUE(within_abs(compare(fy, y), 1e-15)) << "normed";
  EXPECT_TRUE(within_abs(compare(fr, r), 1e-15)) << "rms";
}
