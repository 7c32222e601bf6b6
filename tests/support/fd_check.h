#pragma once
// Central finite differences in double precision for gradient checks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace ggtrain::test_support {

// Compares analytic[i] with (f(x+h e_i) - f(x-h e_i)) / 2h for every i.
// Relative to the largest |analytic| so that tiny entries do not dominate.
inline void expect_grad_matches_fd(std::vector<double>& x, const std::vector<double>& analytic,
                                   const std::function<double()>& f, const std::string& what,
                                   double tol = 1e-7, double h = 1e-5) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  double max_abs = 0;
  for (double g : analytic) max_abs = std::max(max_abs, std::fabs(g));
  ASSERT_GT(max_abs, 0.0) << what << ": analytic gradient is identically zero";
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double fp = f();
    x[i] = saved - h;
    const double fm = f();
    x[i] = saved;
    const double numeric = (fp - fm) / (2 * h);
    const double err = std::fabs(numeric - analytic[i]) / max_abs;
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": worst relative error at element " << worst_i
                        << " (analytic " << analytic[worst_i] << ")";
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
