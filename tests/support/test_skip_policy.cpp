// GGTRAIN_SKIP: in CI (CI=true) a test that cannot run fails; elsewhere it
// is skipped. Both outcomes are captured here as gtest records them.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "support/skip.h"

namespace {

void skip_for_want_of_root() { GGTRAIN_SKIP("needs root"); }

// The single result a GGTRAIN_SKIP records with CI set to `ci` (unset: null).
testing::TestPartResult outcome_with_ci(const char* ci) {
  const char* before = std::getenv("CI");
  const std::string saved = before ? before : "";
  if (ci) ::setenv("CI", ci, 1);
  else ::unsetenv("CI");
  testing::TestPartResultArray results;
  {
    testing::ScopedFakeTestPartResultReporter capture(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    skip_for_want_of_root();
  }
  if (before) ::setenv("CI", saved.c_str(), 1);
  else ::unsetenv("CI");
  EXPECT_EQ(results.size(), 1);
  return results.size() == 1 ? results.GetTestPartResult(0)
                             : testing::TestPartResult(testing::TestPartResult::kSuccess, "", 0, "no result");
}

}  // namespace

TEST(SkipPolicy, ASkipInCiIsAFailureNamingTheReason) {
  const auto r = outcome_with_ci("true");
  EXPECT_TRUE(r.fatally_failed());
  EXPECT_NE(std::string(r.message()).find("needs root"), std::string::npos);
}

TEST(SkipPolicy, OutsideCiItIsASkipWithItsReason) {
  for (const char* ci : {static_cast<const char*>(nullptr), "false", ""}) {
    const auto r = outcome_with_ci(ci);
    EXPECT_TRUE(r.skipped()) << (ci ? ci : "(unset)");
    EXPECT_NE(std::string(r.message()).find("needs root"), std::string::npos);
  }
}
