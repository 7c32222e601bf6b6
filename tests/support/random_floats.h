#pragma once
// Uniform floats in [-scale, scale) from a seeded generator of the library's
// own (the same numbers on every platform).
#include <cstdint>
#include <vector>

#include "util/rng.h"

namespace ggtrain::test_support {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * (float(rng.next_u64() >> 40) / float(1 << 24) * 2.f - 1.f);
  return v;
}

}  // namespace ggtrain::test_support
