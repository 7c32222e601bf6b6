// model/checkpoint: a model written as its GGUF reads back as the same
// config and the same parameters; a file of another shape is refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/init.h"
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
