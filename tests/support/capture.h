#pragma once
// The failures a check records, captured instead of failing the calling
// test: negative controls use it to show that a check can fail.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ggtrain::test_support {

template <typename Check>
std::vector<std::string> failures_of(Check check) {
  testing::TestPartResultArray results;
  {
    testing::ScopedFakeTestPartResultReporter capture(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check();
  }
  std::vector<std::string> out;
  for (int i = 0; i < results.size(); ++i)
    if (results.GetTestPartResult(i).failed()) out.push_back(results.GetTestPartResult(i).message());
  return out;
}

inline bool any_contains(const std::vector<std::string>& messages, const std::string& part) {
  for (const auto& m : messages)
    if (m.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace ggtrain::test_support
