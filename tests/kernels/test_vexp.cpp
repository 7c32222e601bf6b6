// kernels/vexp: the vectorised exp of the softmax loops.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/vexp.h"
#include "support/compare.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
using ggtrain::test_support::compare_where;
using ggtrain::test_support::Tolerance;
using ggtrain::test_support::within_elementwise;
using Vec = std::vector<double>;

// The AVX-512 exp of the softmax loops against the C library's, in float.
TEST(LayerFd, VectorExpMatchesLibm) {
  std::vector<float> x;
  for (int i = -2000; i <= 1000; ++i) x.push_back(float(i) * 0.0437f);  // [-87.4, 43.7]
  x.push_back(-1e30f);
  x.push_back(-INFINITY);
  const float shift = 1.5f;
  std::vector<float> y = x;
  const float sum = exp_shift_sum(y.data(), int64_t(y.size()), shift);
  std::vector<double> ref(x.size());
  double ref_sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ref[i] = std::exp(double(x[i] - shift));  // the float difference the kernel sees
    ref_sum += ref[i];
  }
  // Relative error down to 1e-37 (normal floats); below it, only that the result is as small.
  auto normal = [&](size_t i) { return ref[i] > 1e-37; };
  const auto exp_normal = compare_where(y.data(), ref.data(), ref.size(), normal);
  EXPECT_TRUE(within_elementwise(exp_normal, Tolerance{.rel = 4 * 1.2e-7})) << "exp, a few float ulp";
  for (size_t i = 0; i < x.size(); ++i) {
    if (normal(i)) continue;
    EXPECT_LE(y[i], 1e-37f) << x[i];
  }
  EXPECT_NEAR(sum, ref_sum, 1e-6 * ref_sum);
  EXPECT_NEAR(sum_exp_shift(x.data(), int64_t(x.size()), shift), ref_sum, 1e-6 * ref_sum);
}
