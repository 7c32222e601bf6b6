// The block formats without llama.cpp: error bounds of each quantizer and
// the corner cases of ggml's reference routines, through the type table's
// codecs. (Byte-identity with llama_model_quantize itself is
// tests/compat/llama_cpp_quantize_check.sh.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "quant/type_traits.h"
#include "support/compare.h"

namespace ggtrain {
namespace {

using gguf::TensorType;
using test_support::compare;
using test_support::within_abs;

std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

std::vector<float> round_trip(TensorType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(gguf::storage_bytes(t, x.size()));
  quant::encode_floats(t, x.data(), q.data(), x.size());
  std::vector<float> y(x.size());
  quant::decode_floats(t, q.data(), y.data(), y.size());
  return y;
}

double rms(const std::vector<float>& a) {
  double s = 0;
  for (float v : a) s += double(v) * v;
  return std::sqrt(s / double(a.size()));
}

// The 32-block formats: every weight within one step of its block's grid
// (Q4_0: the block's extreme / 8; Q5_0: / 16; Q5_1: (max - min) / 31 / 2,
// plus the fp16 rounding of the min), 1% slack for the fp16 scale.
TEST(Quant, LegacyBlocksStayWithinOneStep) {
  const auto x = gaussian(32 * 64, 1);
  for (TensorType t : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q5_1}) {
    const auto y = round_trip(t, x);
    for (size_t b = 0; b < x.size(); b += 32) {
      float amax = 0, mn = x[b], mx = x[b];
      for (size_t j = b; j < b + 32; ++j)
        amax = std::max(amax, std::fabs(x[j])), mn = std::min(mn, x[j]), mx = std::max(mx, x[j]);
      const float bound = t == TensorType::Q4_0   ? amax / 8 * 1.01f
                          : t == TensorType::Q5_0 ? amax / 16 * 1.01f
                                                  : (mx - mn) / 31 * 0.51f + std::fabs(mn) * 1e-3f;
      for (size_t j = b; j < b + 32; ++j)
        ASSERT_LE(std::fabs(y[j] - x[j]), bound) << gguf::type_name(t) << " element " << j;
    }
  }
}

// The K-quants on Gaussian weights: relative RMS error well under the
// spacing of their grids (Q4_K 15 steps, Q5_K 31, Q6_K 63 over a
// sub-block's range), ordered by bits.
TEST(Quant, KQuantErrorsShrinkWithBits) {
  const auto x = gaussian(256 * 32, 2, 0.02f);
  std::vector<double> rel;
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    const auto y = round_trip(t, x);
    std::vector<float> err(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i]));
      err[i] = y[i] - x[i];
    }
    rel.push_back(rms(err) / rms(x));
  }
  EXPECT_LT(rel[0], 0.12);
  EXPECT_LT(rel[1], 0.06);
  EXPECT_LT(rel[2], 0.03);
  EXPECT_GT(rel[0], rel[1]);
  EXPECT_GT(rel[1], rel[2]);
}

// ggml's special cases: an all-zero block (Q6_K writes a zero block; the
// offset formats a zero scale), a constant block, a block with one outlier.
TEST(Quant, ZeroConstantAndOutlierBlocks) {
  for (TensorType t :
       {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    const std::vector<float> zero(256, 0.0f);
    for (float v : round_trip(t, zero)) ASSERT_EQ(v, 0.0f) << gguf::type_name(t);
    const std::vector<float> constant(256, 0.5f);
    for (float v : round_trip(t, constant)) ASSERT_NEAR(v, 0.5f, 0.5f / 16) << gguf::type_name(t);
    std::vector<float> outlier(256, 0.01f);
    outlier[77] = -3.0f;
    EXPECT_NEAR(round_trip(t, outlier)[77], -3.0f, 3.0f / 16) << gguf::type_name(t);
  }
}

TEST(Quant, Q8KActivationRoundingKeepsTheExtreme) {
  auto x = gaussian(512, 3);
  x[5] = -9.0f;
  std::vector<float> y(x.size());
  quant::round_activations_for(TensorType::Q4_K, x.data(), y.data(), x.size());
  EXPECT_FLOAT_EQ(y[5], -9.0f);  // the extreme maps to -127 steps of 9/127
  for (size_t i = 0; i < 256; ++i) ASSERT_LE(std::fabs(y[i] - x[i]), 9.0f / 127 / 2 * 1.001f);
}

}  // namespace
}  // namespace ggtrain
