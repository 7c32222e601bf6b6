// model/checkpoint: a model written as its GGUF reads back as the same
// config and the same parameters; a file of another shape is refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "support/family_shapes.h"
#include "support/files.h"
#include "support/temp_dir.h"
#include "support/tiny_llama.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::TempDir;

TEST(Checkpoint, CheckpointRoundTripsThroughGguf) {
  auto c = test_support::tiny_llama(64);
  c.tied = true;
  model::ParamLayout layout(c);
  std::vector<float> p(size_t(layout.total()));
  model::init_params(c, layout, p.data(), 99);
  TempDir tmp;
  const std::string path = tmp / "model.gguf";
  gguf::GgufWriter w;
  model::add_model_tensors(w, c, layout, p.data());
  w.write(path);

  gguf::GgufFile f(path);
  auto c2 = model::config_from_gguf(f);
  EXPECT_EQ(c2.d_model, c.d_model);
  EXPECT_EQ(c2.n_kv_heads, c.n_kv_heads);
  EXPECT_TRUE(c2.tied);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.tensor("blk.1.attn_k.weight").shape(), (std::vector<uint64_t>{32, 16}));
  std::vector<float> q(size_t(layout.total()), 0.f);
  model::load_model_params(f, layout, q.data());
  EXPECT_EQ(0, std::memcmp(p.data(), q.data(), p.size() * sizeof(float)));
}

TEST(Checkpoint, CheckpointLoadRejectsWrongShapes) {
  auto c = test_support::tiny_llama(64);
  model::ParamLayout layout(c);
  std::vector<float> p(size_t(layout.total()), 0.1f);
  TempDir tmp;
  const std::string path = tmp / "model.gguf";
  gguf::GgufWriter w;
  model::add_model_tensors(w, c, layout, p.data());
  w.write(path);
  auto c2 = c;
  c2.d_ff = 40;
  model::ParamLayout other(c2);
  std::vector<float> q(size_t(other.total()));
  gguf::GgufFile f(path);
  try {
    model::load_model_params(f, other, q.data());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ffn_gate"), std::string::npos) << e.what();
  }
}

// A Qwen3.5 (or Qwen3.5-MoE) file with a multi-token-prediction block, as
// the converter writes it: the block counts in block_count and the layer
// list, and its tensors (of any type) come back as stored, written again
// byte for byte.
class PredictionBlock : public ::testing::TestWithParam<const char*> {};

TEST_P(PredictionBlock, IsCarriedAsStored) {
  auto c = test_support::tiny_llama(64);
  c.arch = GetParam();
  c.n_layers = 4;
  test_support::shape_family_layers(c);
  c.attention_layers = "1,2";  // irregular: written as the per-layer list
  const model::ParamLayout layout(c);
  std::vector<float> p(size_t(layout.total()));
  model::init_params(c, layout, p.data(), 7);
  // blk.4: a BF16 projection, F32 norms and an F16 matrix of odd bytes
  auto with_block = c;
  with_block.n_nextn = 1;
  auto block = std::make_shared<std::vector<model::Config::CarriedTensor>>();
  auto bytes = [](size_t n, uint8_t seed) {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = uint8_t((i * 37 + seed) % 251 + 2);  // finite bf16/f16 values
    return b;
  };
  block->push_back({"blk.4.nextn.eh_proj.weight", gguf::TensorType::BF16, {64, 32}, bytes(64 * 32 * 2, 1)});
  block->push_back({"blk.4.nextn.enorm.weight", gguf::TensorType::F32, {32}, bytes(32 * 4, 2)});
  block->push_back({"blk.4.nextn.hnorm.weight", gguf::TensorType::F32, {32}, bytes(32 * 4, 3)});
  block->push_back({"blk.4.attn_v.weight", gguf::TensorType::F16, {32, 16}, bytes(32 * 16 * 2, 4)});
  with_block.nextn_tensors = block;
  TempDir tmp;
  auto write = [&](const model::Config& cfg, const std::string& path) {
    gguf::GgufWriter w;
    model::add_model_tensors(w, cfg, model::ParamLayout(cfg), p.data());
    w.write(path);
  };
  write(with_block, tmp / "a.gguf");

  const gguf::GgufFile f(tmp / "a.gguf");
  EXPECT_EQ(f.get_uint(c.key("block_count")), 5u);
  EXPECT_EQ(f.get_uint(c.key("nextn_predict_layers")), 1u);
  const gguf::Value* list = f.find(c.key("attention.recurrent_layers"));
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->items.size(), 5u);
  EXPECT_EQ(list->items[4].u, 0u) << "the prediction block is listed as attending";
  const auto back = model::config_from_gguf(f);
  EXPECT_EQ(back.n_layers, 4);
  EXPECT_EQ(back.n_nextn, 1);
  EXPECT_EQ(back.attention_layers, "1,2");
  ASSERT_TRUE(back.nextn_tensors);
  ASSERT_EQ(back.nextn_tensors->size(), block->size());
  for (size_t i = 0; i < block->size(); ++i) {
    const auto& [name, type, ne, data] = (*back.nextn_tensors)[i];
    EXPECT_EQ(name, (*block)[i].name);
    EXPECT_EQ(type, (*block)[i].type) << name;
    EXPECT_EQ(ne, (*block)[i].ne) << name;
    EXPECT_EQ(data, (*block)[i].bytes) << name;
  }
  std::vector<float> q(size_t(layout.total()));
  model::load_model_params(f, model::ParamLayout(back), q.data());
  EXPECT_EQ(0, std::memcmp(p.data(), q.data(), p.size() * sizeof(float)));
  write(back, tmp / "b.gguf");
  EXPECT_EQ(test_support::slurp(tmp / "a.gguf"), test_support::slurp(tmp / "b.gguf"));

  // Control: the same file read without the key is a 5-layer model whose
  // last block lacks its parameters.
  auto plain = back;
  plain.n_nextn = 0;
  plain.nextn_tensors = nullptr;
  EXPECT_THROW(model::load_model_params(f, model::ParamLayout(plain), q.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(GatedDeltaNetFamilies, PredictionBlock, ::testing::Values("qwen35", "qwen35moe"));
