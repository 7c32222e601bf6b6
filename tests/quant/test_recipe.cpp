// llama.cpp's type recipe without llama.cpp: the order tensors are written
// in and which type each tensor of a model gets. (Byte-identity with
// llama_model_quantize itself is tests/compat/llama_cpp_quantize_check.sh.)
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "quant/recipe.h"

namespace ggtrain {
namespace {

using gguf::TensorType;

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
  // The float file types are not quantized ones, and have llama.cpp's numbers.
  EXPECT_FALSE(quant::quantized_file_type("f16"));
  EXPECT_EQ(quant::float_file_type(TensorType::F16), quant::FileType::F16);
  EXPECT_EQ(uint32_t(*quant::float_file_type(TensorType::BF16)), 32u);
  EXPECT_EQ(uint32_t(*quant::float_file_type(TensorType::F32)), 0u);
  EXPECT_FALSE(quant::float_file_type(TensorType::Q8_0));
  EXPECT_EQ(quant::quantized_file_type_names().find("f16"), std::string::npos);
}

// F16 and BF16 files: every tensor llama.cpp would quantize becomes the type
// itself, with no K-quant mix (output.weight stays F16, not Q6_K) and no
// fallback (rows of 48 are fine); norms keep theirs.
TEST(Quant, FloatFileTypesConvertWithoutMixOrFallback) {
  for (const auto& [ft, t] :
       {std::pair{quant::FileType::F16, TensorType::F16}, {quant::FileType::BF16, TensorType::BF16}}) {
    const auto types = recipe_types(ft, llama_tensors(8, 48, 160, 320, false));
    EXPECT_EQ(types.at("output.weight"), t);
    EXPECT_EQ(types.at("blk.1.attn_q.weight"), t);
    EXPECT_EQ(types.at("blk.0.attn_v.weight"), t);
    EXPECT_EQ(types.at("blk.0.attn_norm.weight"), TensorType::F32);
  }
}

}  // namespace
}  // namespace ggtrain
