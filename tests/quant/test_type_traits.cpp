// quant/type_traits: the table of tensor types, one row per type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "quant/type_traits.h"
#include "support/compare.h"

namespace ggtrain {
namespace {

using test_support::compare;
using test_support::within_abs;

// Each row of the type table has the functions its decode form needs, and
// they are the codec of that row's type: floats through from_float and
// to_float come back within a step of the type's precision (a row holding
// another type's codec reads the bytes as garbage, or sizes them wrongly).
TEST(TypeTable, EveryRowIsCompleteAndRoundTripsItsOwnType) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(512);
  for (auto& v : x) v = normal(rng);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  ASSERT_FALSE(quant::all_codecs().empty());
  for (const quant::TypeCodec& c : quant::all_codecs()) {
    const std::string name(gguf::type_name(c.type));
    ASSERT_NE(c.to_float, nullptr) << name;
    ASSERT_NE(c.from_float, nullptr) << name;
    EXPECT_EQ(c.round_activations == nullptr, c.decode == quant::DecodeForm::kFloat) << name;
    EXPECT_EQ(c.to_q8_0 != nullptr, c.decode == quant::DecodeForm::kAsQ8_0) << name;
    std::vector<uint8_t> bytes(gguf::storage_bytes(c.type, x.size()) + 64, 0xAB);  // a tail to catch overruns
    c.from_float(x.data(), bytes.data(), x.size());
    for (size_t i = gguf::storage_bytes(c.type, x.size()); i < bytes.size(); ++i)
      ASSERT_EQ(bytes[i], 0xAB) << name << " wrote past its storage size";
    std::vector<float> y(x.size());
    c.to_float(bytes.data(), y.data(), y.size());
    // The coarsest type here, Q4_0, steps by a block's max / 8 and clips
    // the other sign at 7 steps: at most amax / 8 off (measured 0.30 with
    // amax 2.86); F32 exactly, F16/BF16 by a relative 2^-8. A row wired to
    // another type's codec misreads the bytes by far more.
    const double limit = c.type == gguf::TensorType::F32 ? 0.0 : c.block_size == 1 ? amax * 0x1p-8 : amax / 8;
    EXPECT_TRUE(within_abs(compare(y, x), limit)) << name;
  }
}

}  // namespace
}  // namespace ggtrain
