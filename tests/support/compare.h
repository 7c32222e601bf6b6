#pragma once
// The one way tests compare numbers against a reference.
//
// Hand-written `worst = std::max(worst, fabs(a - r))` loops drop NaN
// (std::max(x, NaN) is x), so a kernel that produced NaN passed them. Here
// every element of both sides is checked for finiteness first; any check on a
// Comparison that saw a non-finite value fails and names the element:
//
//   EXPECT_TRUE(within_rel_to_max(compare(actual, ref, n), 1e-5)) << "logits";
//
// Negative control: with GGTRAIN_TEST_POISON_COMPARE=1 in the environment,
// compare() turns the actual side's element n/2 into NaN (in its own copy),
// so every test that goes through it must fail; tests/lint/nan_poison_check.sh
// runs the tests that way. Which tests those are is not a hand-kept list:
// each test that calls compare() writes its name to
// GGTRAIN_COMPARE_USERS_DIR/<program>.txt (tests/CMakeLists.txt defines the
// folder), and the check poisons every test named there.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>  // program_invocation_short_name
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace ggtrain::test_support {

// Elementwise bound |actual - ref| <= abs + rel * |ref| (numpy's allclose).
// {.rel = x} is a pure elementwise relative error, {.abs = x} a pure absolute one.
struct Tolerance {
  double abs = 0;
  double rel = 0;
};

// Both sides in double (the actual side poisoned under the hook) and the
// aggregates over the counted elements. Every element counts for
// finiteness; `counted` (empty: all) only says which enter the error.
struct Comparison {
  std::vector<double> actual, ref;
  std::vector<bool> counted;
  size_t n_counted = 0;
  // NaN when anything non-finite was seen, so printing them cannot hide it.
  double max_abs_diff = 0;
  double max_abs_ref = 0;
  size_t worst_index = 0;  // where |actual - ref| is largest
  std::optional<size_t> nonfinite_index;  // the first non-finite element, either side
  bool nonfinite_in_actual = false;  // which side nonfinite_index is on

  bool finite() const { return !nonfinite_index; }
  bool counts(size_t i) const { return counted.empty() || counted[i]; }

  // max|actual - ref| / max|ref|; 0/0 is 0 (identical zeros), x/0 infinite.
  double rel_to_max() const {
    if (!finite()) return std::numeric_limits<double>::quiet_NaN();
    if (max_abs_ref == 0) return max_abs_diff == 0 ? 0 : std::numeric_limits<double>::infinity();
    return max_abs_diff / max_abs_ref;
  }

  // max over counted elements of |actual - ref| / |ref| (0/0 is 0).
  double max_elementwise_rel() const {
    if (!finite()) return std::numeric_limits<double>::quiet_NaN();
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      if (counts(i)) worst = std::max(worst, ratio(std::fabs(actual[i] - ref[i]), std::fabs(ref[i])));
    return worst;
  }

  // sqrt(sum (actual - ref)^2 / sum ref^2) over counted elements.
  double rel_l2() const {
    if (!finite()) return std::numeric_limits<double>::quiet_NaN();
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      if (counts(i)) num += (actual[i] - ref[i]) * (actual[i] - ref[i]), den += ref[i] * ref[i];
    return std::sqrt(ratio(num, den));
  }

  // a / b where 0/0 is 0 and x/0 is infinite: a zero reference is matched only exactly.
  static double ratio(double a, double b) {
    if (b == 0) return a == 0 ? 0 : std::numeric_limits<double>::infinity();
    return a / b;
  }
};

namespace compare_detail {

inline bool poison_requested() {
  const char* v = std::getenv("GGTRAIN_TEST_POISON_COMPARE");
  return v != nullptr && std::string_view(v) == "1";
}

// Appends "Suite.Name" of the running test to GGTRAIN_COMPARE_USERS_DIR/
// <program>.txt, once per test and process. One write() with O_APPEND: the
// tests of one program run side by side under ctest -j.
inline void record_user() {
#ifdef GGTRAIN_COMPARE_USERS_DIR
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return;
  const std::string line = std::string(info->test_suite_name()) + "." + info->name() + "\n";
  static std::set<std::string> recorded;
  if (!recorded.insert(line).second) return;
  ::mkdir(GGTRAIN_COMPARE_USERS_DIR, 0755);  // EEXIST when another test made it: fine
  const std::string path = std::string(GGTRAIN_COMPARE_USERS_DIR) + "/" + program_invocation_short_name + ".txt";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;  // nan_poison_check fails when too few tests are recorded
  [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
  ::close(fd);
#endif
}

inline void find_first_nonfinite(Comparison& c) {
  for (size_t i = 0; i < c.ref.size(); ++i)
    if (!std::isfinite(c.actual[i]) || !std::isfinite(c.ref[i])) {
      c.nonfinite_index = i;
      c.nonfinite_in_actual = !std::isfinite(c.actual[i]);
      return;
    }
}

inline void aggregate(Comparison& c) {
  for (size_t i = 0; i < c.ref.size(); ++i) {
    if (!c.counts(i)) continue;
    ++c.n_counted;
    const double d = std::fabs(c.actual[i] - c.ref[i]);
    if (d > c.max_abs_diff) c.max_abs_diff = d, c.worst_index = i;
    c.max_abs_ref = std::max(c.max_abs_ref, std::fabs(c.ref[i]));
  }
  if (!c.finite()) c.max_abs_diff = c.max_abs_ref = std::numeric_limits<double>::quiet_NaN();
}

inline std::string element(const char* side, size_t i, double v) {
  std::ostringstream s;
  s.precision(9);
  s << side << "[" << i << "] = " << v;
  return s.str();
}

inline std::string worst_pair(const Comparison& c, size_t i) {
  return element("actual", i, c.actual[i]) + " vs " + element("ref", i, c.ref[i]);
}

// The failure every check shares: a non-finite value, or nothing compared.
inline std::optional<::testing::AssertionResult> unusable(const Comparison& c) {
  if (c.nonfinite_index) {
    const size_t i = *c.nonfinite_index;
    return ::testing::AssertionFailure() << "non-finite value in " << (c.nonfinite_in_actual ? "actual" : "ref")
                                         << ", the first of " << c.ref.size() << " elements: " << worst_pair(c, i);
  }
  if (c.n_counted == 0) return ::testing::AssertionFailure() << "no elements compared";
  return std::nullopt;
}

template <typename A, typename R>
Comparison build(const A* actual, const R* ref, size_t n, std::vector<bool> counted) {
  static_assert(std::is_floating_point_v<A> && std::is_floating_point_v<R>, "compare float or double");
  record_user();
  Comparison c;
  c.actual.assign(actual, actual + n);
  c.ref.assign(ref, ref + n);
  c.counted = std::move(counted);
  if (n > 0 && poison_requested()) c.actual[n / 2] = std::numeric_limits<double>::quiet_NaN();
  find_first_nonfinite(c);
  aggregate(c);
  return c;
}

}  // namespace compare_detail

// Compares actual[0..n) with ref[0..n) in double.
template <typename A, typename R>
Comparison compare(const A* actual, const R* ref, size_t n) {
  return compare_detail::build(actual, ref, n, {});
}

// The same, but only elements with keep(i) enter the error; every element
// is still checked for finiteness.
template <typename A, typename R, typename Keep>
Comparison compare_where(const A* actual, const R* ref, size_t n, Keep keep) {
  std::vector<bool> counted(n);
  for (size_t i = 0; i < n; ++i) counted[i] = bool(keep(i));
  return compare_detail::build(actual, ref, n, std::move(counted));
}

// Vectors of different lengths are a test bug: fail loudly, not compare a prefix.
template <typename A, typename R>
Comparison compare(const std::vector<A>& actual, const std::vector<R>& ref) {
  if (actual.size() != ref.size())
    throw std::invalid_argument("compare: " + std::to_string(actual.size()) + " actual vs " +
                                std::to_string(ref.size()) + " ref elements");
  return compare(actual.data(), ref.data(), ref.size());
}

// std::max for summary numbers that are printed or tracked: std::max(x, NaN)
// is x, which would hide a NaN a check has already reported.
inline double max_keeping_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}

// All values on both sides are finite (for a test that only uses the numbers).
inline ::testing::AssertionResult is_finite(const Comparison& c) {
  if (auto bad = compare_detail::unusable(c)) return *bad;
  return ::testing::AssertionSuccess();
}

// max|actual - ref| <= limit.
inline ::testing::AssertionResult within_abs(const Comparison& c, double limit) {
  if (auto bad = compare_detail::unusable(c)) return *bad;
  if (c.max_abs_diff <= limit) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |actual - ref| = " << c.max_abs_diff << " > " << limit << " at "
                                       << compare_detail::worst_pair(c, c.worst_index);
}

// max|actual - ref| / max|ref| <= limit.
inline ::testing::AssertionResult within_rel_to_max(const Comparison& c, double limit) {
  if (auto bad = compare_detail::unusable(c)) return *bad;
  if (c.rel_to_max() <= limit) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |actual - ref| / max |ref| = " << c.rel_to_max() << " > " << limit
                                       << " (max |ref| " << c.max_abs_ref << ") at "
                                       << compare_detail::worst_pair(c, c.worst_index);
}

// |actual - ref| <= tol.abs + tol.rel * |ref| for every counted element.
inline ::testing::AssertionResult within_elementwise(const Comparison& c, Tolerance tol) {
  if (auto bad = compare_detail::unusable(c)) return *bad;
  double worst = 0;  // the largest |actual - ref| / bound
  size_t at = 0;
  for (size_t i = 0; i < c.ref.size(); ++i) {
    if (!c.counts(i)) continue;
    const double r = Comparison::ratio(std::fabs(c.actual[i] - c.ref[i]), tol.abs + tol.rel * std::fabs(c.ref[i]));
    if (r > worst) worst = r, at = i;
  }
  if (worst <= 1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "|actual - ref| > " << tol.abs << " + " << tol.rel << " |ref| at "
                                       << compare_detail::worst_pair(c, at) << " (" << worst << " x the bound)";
}

// sqrt(sum (actual - ref)^2 / sum ref^2) <= limit.
inline ::testing::AssertionResult within_rel_l2(const Comparison& c, double limit) {
  if (auto bad = compare_detail::unusable(c)) return *bad;
  if (c.rel_l2() <= limit) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative L2 error " << c.rel_l2() << " > " << limit
                                       << "; largest difference at " << compare_detail::worst_pair(c, c.worst_index);
}

// max|actual - ref| > limit: the two did differ ("it ran in bf16", "the adapter trained").
inline ::testing::AssertionResult differs_by_more_than(const Comparison& c, double limit) {
  if (auto bad = compare_detail::unusable(c)) return *bad;
  if (c.max_abs_diff > limit) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |actual - ref| = " << c.max_abs_diff << ", expected more than " << limit;
}

}  // namespace ggtrain::test_support
