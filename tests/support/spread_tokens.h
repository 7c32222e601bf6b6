#pragma once
// Token ids for model tests: a fixed sequence that visits the vocabulary
// out of order (a stride of 37), so no two neighbours repeat.
#include <cstdint>
#include <vector>

namespace ggtrain::test_support {

inline std::vector<int32_t> spread_tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 37 + 11) % vocab);
  return t;
}

}  // namespace ggtrain::test_support
