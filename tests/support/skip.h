#pragma once
// GGTRAIN_SKIP(reason): skip a test that cannot run here, except in CI.
// CI (CI=true) runs as root on a machine that can create namespaces, mount
// a tmpfs and switch users, so a test that skips there for want of those has
// not tested anything: it fails, with the reason. Elsewhere it is skipped
// with the reason. Only a missing CPU feature may skip in CI (GTEST_SKIP).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace ggtrain::test_support {

inline bool skips_fail() {
  const char* ci = std::getenv("CI");
  return ci && std::strcmp(ci, "true") == 0;
}

}  // namespace ggtrain::test_support

#define GGTRAIN_SKIP(reason)                                                               \
  do {                                                                                     \
    const std::string ggtrain_skip_reason_ = (reason);                                     \
    if (::ggtrain::test_support::skips_fail())                                             \
      FAIL() << ggtrain_skip_reason_ << " (in CI, CI=true, a test that cannot run fails)"; \
    else GTEST_SKIP() << ggtrain_skip_reason_;                                             \
  } while (0)
