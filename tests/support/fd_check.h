#pragma once
// Central finite differences in double precision for gradient checks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support/compare.h"

namespace ggtrain::test_support {

// (f(x+h e_i) - f(x-h e_i)) / 2h for every i, restoring x.
inline std::vector<double> central_differences(std::vector<double>& x, const std::function<double()>& f, double h) {
  std::vector<double> numeric(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double fp = f();
    x[i] = saved - h;
    const double fm = f();
    x[i] = saved;
    numeric[i] = (fp - fm) / (2 * h);
  }
  return numeric;
}

// Compares analytic[i] with the central difference for every i, relative to
// the largest |analytic| so that tiny entries do not dominate. Both sides
// must be finite: a NaN loss makes NaN differences, which must fail too.
inline void expect_grad_matches_fd(std::vector<double>& x, const std::vector<double>& analytic,
                                   const std::function<double()>& f, const std::string& what, double tol = 1e-7,
                                   double h = 1e-5) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const Comparison c = compare(central_differences(x, f, h), analytic);
  ASSERT_TRUE(is_finite(c)) << what << " (actual: finite differences, ref: analytic gradient)";
  ASSERT_GT(c.max_abs_ref, 0.0) << what << ": analytic gradient is identically zero";
  EXPECT_TRUE(within_rel_to_max(c, tol)) << what << " (actual: finite differences, ref: analytic gradient)";
}

inline std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
  std::vector<double> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = scale * (double(s >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace ggtrain::test_support
