// The block formats and llama.cpp's type recipe, without llama.cpp: error
// bounds of each quantizer, the corner cases of ggml's reference routines,
// and which type each tensor of a model gets. (Byte-identity with
// llama_model_quantize itself is tests/compat/llama_cpp_quantize_check.sh.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "kernels/number_formats.h"
#include "quant/blocks.h"
#include "quant/recipe.h"
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

std::vector<quant::TensorShape> llama_tensors(int layers, uint64_t d, uint64_t ff, uint64_t vocab, bool tied) {
  std::vector<quant::TensorShape> t{{"token_embd.weight", {d, vocab}}, {"output_norm.weight", {d}}};
  if (!tied) t.push_back({"output.weight", {d, vocab}});
  for (int l = 0; l < layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output"}) t.push_back({b + n + ".weight", {d, d}});
    t.push_back({b + "ffn_gate.weight", {d, ff}});
    t.push_back({b + "ffn_up.weight", {d, ff}});
    t.push_back({b + "ffn_down.weight", {ff, d}});
    t.push_back({b + "attn_norm.weight", {d}});
    t.push_back({b + "ffn_norm.weight", {d}});
  }
  std::sort(t.begin(), t.end(),
            [](const auto& a, const auto& b) { return quant::llama_cpp_tensor_before(a.name, b.name); });
  return t;
}

std::map<std::string, TensorType> recipe_types(quant::FileType ft, const std::vector<quant::TensorShape>& t) {
  quant::TypeRecipe r(ft, t, 8);
  std::map<std::string, TensorType> out;
  for (const auto& s : t) out[s.name] = r.next(s, TensorType::F32);
  return out;
}

TEST(Quant, LlamaCppOrderPutsGlobalTensorsFirstThenLayersByNumber) {
  EXPECT_TRUE(quant::llama_cpp_tensor_before("token_embd.weight", "blk.0.attn_k.weight"));
  EXPECT_TRUE(quant::llama_cpp_tensor_before("blk.2.ffn_up.weight", "blk.10.attn_k.weight"));
  EXPECT_TRUE(quant::llama_cpp_tensor_before("blk.2.attn_v.weight", "blk.2.ffn_down.weight"));
  EXPECT_TRUE(quant::llama_cpp_tensor_before("output.weight", "token_embd.weight"));
}

// Q4_K_M on 8 layers: attn_v and ffn_down of layers 0, 3, 6, 7 (first and
// last eighth, every third between) and the output get Q6_K; norms stay F32.
TEST(Quant, Q4KMRaisesTheLayersLlamaCppRaises) {
  const auto types = recipe_types(quant::FileType::Q4_K_M, llama_tensors(8, 256, 768, 320, false));
  for (int l = 0; l < 8; ++l) {
    const bool more = l == 0 || l == 3 || l == 6 || l == 7;
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(types.at(b + "attn_v.weight"), more ? TensorType::Q6_K : TensorType::Q4_K) << l;
    EXPECT_EQ(types.at(b + "ffn_down.weight"), more ? TensorType::Q6_K : TensorType::Q4_K) << l;
    EXPECT_EQ(types.at(b + "attn_q.weight"), TensorType::Q4_K);
    EXPECT_EQ(types.at(b + "ffn_norm.weight"), TensorType::F32);
  }
  EXPECT_EQ(types.at("output.weight"), TensorType::Q6_K);
  EXPECT_EQ(types.at("token_embd.weight"), TensorType::Q4_K);
}

TEST(Quant, TiedEmbeddingsTakeTheOutputsTypeAndShortRowsFallBack) {
  const auto tied = recipe_types(quant::FileType::Q4_K_S, llama_tensors(8, 256, 768, 320, true));
  EXPECT_EQ(tied.at("token_embd.weight"), TensorType::Q6_K);
  EXPECT_EQ(tied.at("blk.3.attn_v.weight"), TensorType::Q5_K);  // Q4_K_S: first four attn_v
  EXPECT_EQ(tied.at("blk.4.attn_v.weight"), TensorType::Q4_K);
  EXPECT_EQ(tied.at("blk.0.ffn_down.weight"), TensorType::Q5_K);  // first eighth
  EXPECT_EQ(tied.at("blk.1.ffn_down.weight"), TensorType::Q4_K);
  // Rows of 64 and 160: 256-block types fall back to 32-block ones.
  const auto small = recipe_types(quant::FileType::Q4_K_M, llama_tensors(8, 64, 160, 320, false));
  EXPECT_EQ(small.at("blk.1.attn_q.weight"), TensorType::Q5_0);
  EXPECT_EQ(small.at("blk.0.attn_v.weight"), TensorType::Q8_0);  // Q6_K -> Q8_0
  EXPECT_EQ(small.at("output.weight"), TensorType::Q8_0);
  const auto q5 = recipe_types(quant::FileType::Q5_K_S, llama_tensors(8, 64, 160, 320, false));
  EXPECT_EQ(q5.at("blk.1.attn_q.weight"), TensorType::Q5_1);
  // Rows of 48: not even a multiple of 32, stored F16.
  const auto odd = recipe_types(quant::FileType::Q4_0, llama_tensors(8, 48, 160, 320, false));
  EXPECT_EQ(odd.at("blk.1.attn_q.weight"), TensorType::F16);
}

TEST(Quant, FileTypeNames) {
  EXPECT_EQ(quant::quantized_file_type("Q4_K_M"), quant::FileType::Q4_K_M);
  EXPECT_EQ(quant::quantized_file_type("q6_k"), quant::FileType::Q6_K);
  EXPECT_FALSE(quant::quantized_file_type("q3_k_m"));
  EXPECT_EQ(quant::file_type_name(quant::FileType::Q5_K_S), "q5_k_s");
}

}  // namespace
}  // namespace ggtrain

namespace ggtrain {
namespace {

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
