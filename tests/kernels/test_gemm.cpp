// kernels/gemm: the linear layer's backward against central finite differences in
// double. Each layer is probed with L = sum(out * probe) for a random probe.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/gemm.h"
#include "support/compare.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
using ggtrain::test_support::dot;
using ggtrain::test_support::expect_grad_matches_fd;
using ggtrain::test_support::random_vector;
using Vec = std::vector<double>;

TEST(LayerFd, Linear) {
  const int64_t M = 5, K = 7, N = 4;
  Vec x = random_vector(M * K, 1), w = random_vector(N * K, 2), probe = random_vector(M * N, 3);
  auto loss = [&] {
    Vec y(M * N);
    linear_forward(y.data(), x.data(), w.data(), M, K, N);
    return dot(y, probe);
  };
  Vec dx(M * K, 0.0), dw(N * K, 0.0);
  linear_backward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), M, K, N, false);
  expect_grad_matches_fd(x, dx, loss, "linear dx");
  expect_grad_matches_fd(w, dw, loss, "linear dw");
}
