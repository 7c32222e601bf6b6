// A model's config as GGUF metadata: the keys each architecture writes (and
// leaves out where llama.cpp assumes the same value), read back field by
// field, and hostile values refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "quant/gguf_floats.h"
#include "support/random_model.h"
#include "support/temp_dir.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::small_model_config;
using test_support::TempDir;
using test_support::write_random_model;

// Gemma 3's sliding-window keys: the window always (llama.cpp reads no
// window without it), the pattern and the local RoPE base only where they
// differ from what llama.cpp assumes (the converter writes neither), linear
// RoPE scaling as the converter writes it; all read back.
TEST(ModelConfig, Gemma3WritesTheSlidingWindowKeysLlamaCppWouldNotAssume) {
  TempDir tmp;
  auto c = small_model_config(true, 2);
  c.arch = "gemma3";
  c.sliding_window = 512;
  write_random_model(c, tmp / "default.gguf");
  const gguf::GgufFile d(tmp / "default.gguf");
  EXPECT_EQ(d.get_uint("gemma3.attention.sliding_window"), 512u);
  EXPECT_EQ(d.find("gemma3.attention.sliding_window_pattern"), nullptr);
  EXPECT_EQ(d.find("gemma3.rope.freq_base_swa"), nullptr);
  EXPECT_EQ(d.find("gemma3.rope.scaling.type"), nullptr);
  EXPECT_EQ(model::config_from_gguf(d).swa_pattern, 6);
  EXPECT_EQ(model::config_from_gguf(d).rope_freq_base_swa, 10000.0);
  c.swa_pattern = 4;
  c.rope_freq_base_swa = 20000;
  c.rope_scaling_factor = 8;
  write_random_model(c, tmp / "other.gguf");
  const gguf::GgufFile o(tmp / "other.gguf");
  EXPECT_EQ(o.get_uint("gemma3.attention.sliding_window_pattern"), 4u);
  EXPECT_EQ(o.get_float("gemma3.rope.freq_base_swa"), 20000.0);
  EXPECT_EQ(o.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(o.get_float("gemma3.rope.scaling.factor"), 8.0);
  const auto back = model::config_from_gguf(o);
  for (const auto& f : model::config_fields()) EXPECT_TRUE(model::same_field(back, c, f, true)) << f.name;
}

// A hostile head count of 0 (with llama.rope.dimension_count present, as in
// every llama.cpp model) is a clear error, not a division by zero while the
// RoPE width is compared with the head size.
TEST(ModelConfig, ZeroHeadCountIsAClearError) {
  TempDir tmp("ggtrain_zero_heads");
  const gguf::GgufFile src(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf");
  ASSERT_NE(src.find("llama.rope.dimension_count"), nullptr);
  gguf::GgufWriter w;
  for (const auto& [k, v] : src.metadata()) w.set(k, k == "llama.attention.head_count" ? gguf::Value::u32(0) : v);
  std::vector<std::vector<float>> keep;
  for (const auto& t : src.tensors()) {
    keep.push_back(quant::tensor_floats(src, t));
    quant::add_float_tensor(w, t.name, t.type, t.shape(), keep.back().data());
  }
  w.write(tmp / "zero-heads.gguf");
  const gguf::GgufFile f(tmp / "zero-heads.gguf");
  for (bool embedding_is_d_model : {true, false}) {
    try {
      model::config_from_gguf(f, embedding_is_d_model);
      ADD_FAILURE() << "a head count of 0 was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("n_heads must be positive"), std::string::npos) << e.what();
    }
  }
}
