// The comparison helper of support/compare.h: a non-finite value on either
// side fails every check and is named by index and side; close finite data
// passes; the poison hook turns one element of the actual side into NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "support/compare.h"

using namespace ggtrain::test_support;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> ramp(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 1.0 + 0.25 * double(i);
  return v;
}

// Every check on c fails, and its message contains `needle`.
void expect_every_check_fails(const Comparison& c, const std::string& needle) {
  for (const auto& r :
       {is_finite(c), within_abs(c, 1e9), within_rel_to_max(c, 1e9),
        within_elementwise(c, Tolerance{.abs = 1e9, .rel = 1e9}), within_rel_l2(c, 1e9), differs_by_more_than(c, -1)}) {
    EXPECT_FALSE(r);
    EXPECT_NE(std::string(r.message()).find(needle), std::string::npos) << r.message();
  }
}

// Sets GGTRAIN_TEST_POISON_COMPARE for its lifetime, restoring what was there.
class PoisonHook {
 public:
  explicit PoisonHook(const char* value) {
    if (const char* old = std::getenv(kName)) old_ = old;
    value ? setenv(kName, value, 1) : unsetenv(kName);
  }
  ~PoisonHook() { old_ ? setenv(kName, old_->c_str(), 1) : unsetenv(kName); }

 private:
  static constexpr const char* kName = "GGTRAIN_TEST_POISON_COMPARE";
  std::optional<std::string> old_;
};

}  // namespace

TEST(Compare, CloseFiniteDataPasses) {
  const PoisonHook off(nullptr);
  auto ref = ramp(64);
  auto actual = ref;
  actual[5] += 1e-7;
  const Comparison c = compare(actual, ref);
  EXPECT_TRUE(is_finite(c));
  EXPECT_TRUE(within_abs(c, 1e-6));
  EXPECT_TRUE(within_rel_to_max(c, 1e-7));
  EXPECT_TRUE(within_elementwise(c, Tolerance{.rel = 1e-7}));
  EXPECT_TRUE(within_rel_l2(c, 1e-7));
  EXPECT_TRUE(differs_by_more_than(c, 0.0));
  EXPECT_EQ(c.worst_index, 5u);
  EXPECT_NEAR(c.max_abs_diff, 1e-7, 1e-15);
  EXPECT_EQ(c.max_abs_ref, ref.back());
}

TEST(Compare, DifferencesBeyondTheLimitFailAndNameTheWorstElement) {
  const PoisonHook off(nullptr);
  auto ref = ramp(64);
  auto actual = ref;
  actual[40] += 0.5;
  const Comparison c = compare(actual, ref);
  const auto r = within_abs(c, 0.1);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("actual[40] = "), std::string::npos) << r.message();
  EXPECT_FALSE(within_rel_to_max(c, 1e-3));
  EXPECT_FALSE(within_elementwise(c, Tolerance{.abs = 0.1}));
  EXPECT_FALSE(differs_by_more_than(compare(ref, ref), 0.0));
}

TEST(Compare, NaNInActualFailsAndIsNamed) {
  const PoisonHook off(nullptr);
  auto ref = ramp(32);
  auto actual = ref;
  actual[17] = kNaN;
  const Comparison c = compare(actual, ref);
  ASSERT_TRUE(c.nonfinite_index.has_value());
  EXPECT_EQ(*c.nonfinite_index, 17u);
  EXPECT_TRUE(c.nonfinite_in_actual);
  EXPECT_TRUE(std::isnan(c.max_abs_diff));  // printing the number cannot hide it
  EXPECT_TRUE(std::isnan(c.rel_to_max()));
  expect_every_check_fails(c, "actual[17] = nan");
}

TEST(Compare, NaNInRefFailsAndIsNamed) {
  const PoisonHook off(nullptr);
  auto ref = ramp(32);
  auto actual = ref;
  ref[3] = kNaN;
  const Comparison c = compare(actual, ref);
  EXPECT_FALSE(c.nonfinite_in_actual);
  expect_every_check_fails(c, "ref[3] = nan");
}

TEST(Compare, InfinityFails) {
  const PoisonHook off(nullptr);
  auto ref = ramp(8);
  auto actual = ref;
  actual[6] = kInf;
  expect_every_check_fails(compare(actual, ref), "actual[6] = inf");
  actual[6] = -kInf;
  expect_every_check_fails(compare(actual, ref), "actual[6] = -inf");
}

TEST(Compare, AllNaNFails) {
  const PoisonHook off(nullptr);
  const std::vector<float> nan(10, float(kNaN));
  // the old max(diff, |a - r|) loop gave 0 here
  expect_every_check_fails(compare(nan, nan), "actual[0] = nan");
}

TEST(Compare, TheFirstNonFiniteElementIsReported) {
  const PoisonHook off(nullptr);
  auto ref = ramp(100);
  auto actual = ref;
  actual[70] = kNaN;
  ref[42] = kInf;
  actual[90] = kNaN;
  const Comparison c = compare(actual, ref);
  EXPECT_EQ(*c.nonfinite_index, 42u);
  expect_every_check_fails(c, "ref[42] = inf");
}

TEST(Compare, ElementsLeftOutOfTheErrorAreStillCheckedForFiniteness) {
  const PoisonHook off(nullptr);
  auto ref = ramp(20);
  auto actual = ref;
  actual[2] = 100;  // outside the comparison: allowed to differ
  auto not_two = [](size_t i) { return i != 2; };
  EXPECT_TRUE(within_abs(compare_where(actual.data(), ref.data(), ref.size(), not_two), 0.0));
  actual[2] = kNaN;  // but never to be NaN
  expect_every_check_fails(compare_where(actual.data(), ref.data(), ref.size(), not_two), "actual[2] = nan");
  auto none = [](size_t) { return false; };
  EXPECT_FALSE(within_abs(compare_where(ref.data(), ref.data(), ref.size(), none), 1.0));  // nothing compared
}

TEST(Compare, ElementwiseToleranceIsAbsPlusRelTimesRef) {
  const PoisonHook off(nullptr);
  const std::vector<double> ref{0.0, 10.0, -100.0};
  EXPECT_TRUE(within_elementwise(compare(std::vector<double>{1e-6, 10.1, -101.0}, ref), {.abs = 1e-6, .rel = 1e-2}));
  EXPECT_FALSE(within_elementwise(compare(std::vector<double>{3e-6, 10.0, -100.0}, ref), {.abs = 1e-6, .rel = 1e-2}));
  // a pure relative tolerance matches a zero reference only exactly
  EXPECT_FALSE(within_elementwise(compare(std::vector<double>{1e-300, 10.0, -100.0}, ref), {.rel = 0.5}));
  EXPECT_DOUBLE_EQ(compare(std::vector<double>{0.0, 11.0, -100.0}, ref).max_elementwise_rel(), 0.1);
}

TEST(Compare, MismatchedLengthsAreATestBug) {
  EXPECT_THROW(compare(std::vector<double>(3), std::vector<double>(4)), std::invalid_argument);
}

TEST(Compare, MaxKeepingNaNDoesNotDropIt) {
  EXPECT_TRUE(std::isnan(max_keeping_nan(1.0, kNaN)));
  EXPECT_TRUE(std::isnan(max_keeping_nan(kNaN, 1.0)));
  EXPECT_EQ(max_keeping_nan(1.0, 2.0), 2.0);
}

// The negative control of tests/lint/nan_poison_check.sh: element n/2 of the
// actual side turns NaN in the helper's copy, never in the caller's data.
TEST(Compare, PoisonHookTurnsTheMiddleActualElementNaN) {
  const PoisonHook on("1");
  const auto ref = ramp(9);
  const auto actual = ref;
  const Comparison c = compare(actual, ref);
  EXPECT_EQ(c.nonfinite_index, std::optional<size_t>(4));
  EXPECT_TRUE(c.nonfinite_in_actual);
  EXPECT_FALSE(within_abs(c, 1e9));
  EXPECT_EQ(actual, ref);  // the caller's data is untouched
  const PoisonHook other("0");
  EXPECT_TRUE(within_abs(compare(actual, ref), 0.0));  // only "1" poisons
}
