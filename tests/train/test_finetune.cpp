// Continued training of an existing llama GGUF (init.from) and frozen
// tensors (train.freeze), on models the tests train and export themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "convert/export.h"
#include "convert/import.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "quant/gguf_floats.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

bool same_bytes(const gguf::GgufFile& a, const gguf::GgufFile& b, const std::string& name) {
  const auto& ta = a.tensor(name);
  const auto& tb = b.tensor(name);
  return ta.type == tb.type && ta.n_bytes == tb.n_bytes && std::memcmp(ta.data, tb.data, ta.n_bytes) == 0;
}

train::RunConfig continue_config(TempDir& tmp, const std::string& from, int64_t steps) {
  train::RunConfig c = train::preset("s15");  // the model section must come from the file
  c.data.corpus = {tmp / "corpus.txt"};
  c.init.from = from;
  c.train.steps = steps;
  c.train.batch = 4;
  c.train.seq_len = 32;
  c.train.threads = 1;
  c.train.eval_every = 10;
  c.train.sample_every = 0;
  c.checkpoint.every = 5;
  return c;
}

}  // namespace

TEST(Finetune, ContinuesAModelAndResumesExactly) {
  TempDir tmp("ggtrain_from");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  const auto c = continue_config(tmp, base, 10);
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 5);
  // The shape, numerics and vocabulary are the base's, not the s15 preset's.
  const gguf::GgufFile b(base), w(train::weights_path(tmp / "a", 10));
  const auto mb = model::config_from_gguf(b), mw = model::config_from_gguf(w);
  EXPECT_EQ(mw.d_model, mb.d_model);
  EXPECT_EQ(mw.n_layers, mb.n_layers);
  EXPECT_EQ(mw.n_kv_heads, mb.n_kv_heads);
  EXPECT_EQ(mw.ctx, mb.ctx);
  EXPECT_EQ(mw.tied, mb.tied);
  EXPECT_EQ(w.find("tokenizer.ggml.tokens")->items, b.find("tokenizer.ggml.tokens")->items);
  // It trained from the base's weights: the first step's loss is the base's
  // level (about 3.5-4 after 10 steps), far below a fresh model's ln(320) = 5.8.
  const auto s = test_support::run_quiet(tmp / "c", c, false);
  EXPECT_LT(s.first_loss, 5.0);
  EXPECT_FALSE(same_bytes(b, w, "blk.0.attn_q.weight"));  // and the weights moved
}

TEST(Finetune, ContinuesAQ8_0Export) {
  TempDir tmp("ggtrain_from_q8");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  convert::export_model(base, tmp / "base-q8_0.gguf", gguf::TensorType::Q8_0);
  const auto c = continue_config(tmp, tmp / "base-q8_0.gguf", 5);
  test_support::run_quiet(tmp / "r", c, false);
  const gguf::GgufFile w(train::weights_path(tmp / "r", 5));
  for (const auto& t : w.tensors()) EXPECT_EQ(t.type, gguf::TensorType::F32) << t.name;  // F32 master weights
}

TEST(Finetune, ContradictingModelKeyIsAnErrorNamingIt) {
  TempDir tmp("ggtrain_from_bad");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  auto c = continue_config(tmp, base, 5);
  c.model.d_model = 32;
  c.set_keys.insert("model.d_model");
  try {
    test_support::run_quiet(tmp / "r", c, false);
    ADD_FAILURE() << "a contradicting model.d_model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.d_model = 32 but the model has 64"), std::string::npos) << e.what();
  }
  // The same value as the file's is fine.
  c.model.d_model = 64;
  EXPECT_NO_THROW(test_support::run_quiet(tmp / "ok", c, false));
}

TEST(Finetune, FrozenTensorsKeepTheirBytesAndHaveNoMoments) {
  TempDir tmp("ggtrain_freeze");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  auto c = continue_config(tmp, base, 10);
  c.train.freeze = {"token_embd", "blk.0", "output_norm"};
  test_support::run_quiet(tmp / "a", c, false);
  test_support::run_quiet(tmp / "b", c, false, 5);
  test_support::run_quiet(tmp / "b", c, true);
  std::string why;
  EXPECT_TRUE(
      test_support::same_tensor_data(train::weights_path(tmp / "a", 10), train::weights_path(tmp / "b", 10), &why))
      << why;
  const gguf::GgufFile b(base), w(train::weights_path(tmp / "a", 10)), s(train::state_path(tmp / "a", 10));
  for (const auto& t : b.tensors()) {
    const bool frozen =
        t.name == "token_embd.weight" || t.name == "output_norm.weight" || t.name.rfind("blk.0.", 0) == 0;
    EXPECT_EQ(same_bytes(b, w, t.name), frozen) << t.name;
    EXPECT_EQ(s.find_tensor("adam.m." + t.name) == nullptr, frozen) << t.name;
  }
  // The frozen set cannot change on resume: the moments would not match.
  auto more = train::saved_run_config(tmp / "b");
  more.train.steps = 15;
  more.train.freeze = {"token_embd"};
  train::TrainOptions o;
  o.run_dir = tmp / "b";
  o.config = more;
  o.resume = true;
  o.quiet = true;
  EXPECT_THROW(train::run_training(o), Error);
}

// An older trainer's per-head checkpoint: `ggtrain import` fuses it, and the
// imported model continues (fresh AdamW state) and resumes exactly.
TEST(Finetune, ImportedPerHeadCheckpointContinuesAndResumes) {
  TempDir tmp("ggtrain_from_import");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  const gguf::GgufFile b(base);
  const auto mc = model::config_from_gguf(b);
  gguf::GgufWriter w;  // the base, written per head as toy-from-scratch/v1 does
  for (const auto& [k, v] : b.metadata())
    if (k.rfind("ggtrain.", 0) != 0) w.set(k, v);
  w.set("toy.checkpoint_format", gguf::Value::str("toy-from-scratch/v1"));
  w.set("toy.ggml_native", gguf::Value::boolean(true));
  std::vector<std::vector<float>> keep;
  for (const auto& t : b.tensors()) {
    keep.push_back(quant::tensor_floats(b, t));
    const bool qkv = t.name.find(".attn_q.") != std::string::npos || t.name.find(".attn_k.") != std::string::npos ||
                     t.name.find(".attn_v.") != std::string::npos;
    if (!qkv) {
      quant::add_float_tensor(w, t.name, gguf::TensorType::F32, t.shape(), keep.back().data());
      continue;
    }
    const int64_t dh = mc.d_head(), heads = int64_t(t.ne[1]) / dh;
    const std::string stem = t.name.substr(0, t.name.size() - std::string(".weight").size());
    for (int64_t h = 0; h < heads; ++h)
      quant::add_float_tensor(w, fmt::format("{}.head_{}.weight", stem, h), gguf::TensorType::F32,
                              {uint64_t(mc.d_model), uint64_t(dh)}, keep.back().data() + h * dh * mc.d_model);
  }
  w.write(tmp / "per-head.gguf");
  convert::import_checkpoint(tmp / "per-head.gguf", tmp / "imported.gguf");
  const gguf::GgufFile imp(tmp / "imported.gguf");
  for (const auto& t : b.tensors()) EXPECT_TRUE(same_bytes(b, imp, t.name)) << t.name;

  const auto c = continue_config(tmp, tmp / "imported.gguf", 10);
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 5);
}

// A Llama 3.x file (rope_freqs.weight, RoPE base 500000): the factors come
// with init.from into the model, every checkpoint carries them unchanged (a
// resume, which reads its model from the saved config, takes them from the
// file again), and a LoRA run on it trains against them too.
TEST(Finetune, Llama3RopeFactorsComeWithTheModelAndSurviveResume) {
  TempDir tmp("ggtrain_from_llama3");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  const std::vector<float> factors = {1.0f, 1.75f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};  // tiny: d_head 16
  {
    const gguf::GgufFile b(base);
    gguf::GgufWriter w;
    for (const auto& [k, v] : b.metadata()) w.set(k, v);
    w.set("llama.rope.freq_base", gguf::Value::f32(500000.0f));
    quant::add_float_tensor(w, model::kRopeFreqsTensor, gguf::TensorType::F32, {factors.size()}, factors.data());
    std::vector<std::vector<float>> keep;
    for (const auto& t : b.tensors()) {
      keep.push_back(quant::tensor_floats(b, t));
      quant::add_float_tensor(w, t.name, gguf::TensorType::F32, t.shape(), keep.back().data());
    }
    w.write(tmp / "llama3.gguf");
  }
  auto c = continue_config(tmp, tmp / "llama3.gguf", 10);
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 5);
  const gguf::GgufFile l3(tmp / "llama3.gguf");
  for (int64_t step : {5, 10}) {
    const gguf::GgufFile w(train::weights_path(tmp / "b", step));
    EXPECT_TRUE(same_bytes(l3, w, model::kRopeFreqsTensor)) << "step " << step;
    EXPECT_EQ(model::config_from_gguf(w).rope_freq_base, 500000.0);
  }
  // (A resume that lost the factors would train steps 6-10 on plain RoPE and
  // end elsewhere than the uninterrupted run; that the training forward uses
  // them: Decoder.MatchesTrainingForwardWithLlama3RopeFactors.)

  c.train.lora.rank = 2;
  c.train.steps = 4;
  c.checkpoint.every = 2;
  test_support::expect_exact_resume(tmp / "la", tmp / "lb", c, 2);
}

// Qwen3 (model.arch = "qwen3": head norms, NeoX RoPE, heads of 24 on a
// d_model of 64) trained from scratch, then continued from its checkpoint:
// both resume bit-exactly, and the checkpoint is a qwen3 file with the
// head norms and qwen3.attention.key_length (llama.cpp's agreement on what it
// means: tests/llama_cpp_qwen3_check.sh).
TEST(Finetune, Qwen3TrainsContinuesAndResumesExactly) {
  TempDir tmp("ggtrain_qwen3");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1200);
  auto fresh = test_support::tiny_run_config(tmp / "corpus.txt", 10);
  fresh.model.arch = "qwen3";
  fresh.model.head_dim = 24;
  fresh.checkpoint.every = 5;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", fresh, 5);
  const std::string ck = train::weights_path(tmp / "a", 10);
  const gguf::GgufFile f(ck);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_uint("qwen3.attention.key_length"), 24u);
  EXPECT_EQ(f.tensor("blk.1.attn_q_norm.weight").ne[0], 24u);
  EXPECT_EQ(f.find("llama.block_count"), nullptr);
  const auto c = continue_config(tmp, ck, 10);
  test_support::expect_exact_resume(tmp / "c", tmp / "d", c, 5);
  EXPECT_EQ(model::config_from_gguf(gguf::GgufFile(train::weights_path(tmp / "c", 10))).head_dim, 24);
}

// Gemma 3 (model.arch = "gemma3": GeGLU, post-norms, scaled embedding, a
// sliding window of 8 on every other layer with its own RoPE base, linear
// RoPE scaling on the others) trained from scratch and continued from its
// checkpoint: both resume bit-exactly, and the window and RoPE keys come
// with the file (llama.cpp's agreement on what they mean:
// tests/compat/llama_cpp_arch_check.sh gemma3).
TEST(Finetune, Gemma3TrainsContinuesAndResumesExactly) {
  TempDir tmp("ggtrain_gemma3");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1200);
  auto fresh = test_support::tiny_run_config(tmp / "corpus.txt", 10);
  fresh.model.arch = "gemma3";
  fresh.model.head_dim = 24;
  fresh.model.sliding_window = 8;
  fresh.model.swa_pattern = 2;
  fresh.model.rope_freq_base_swa = 5000;
  fresh.model.rope_scaling_factor = 2;
  fresh.checkpoint.every = 5;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", fresh, 5);
  const std::string ck = train::weights_path(tmp / "a", 10);
  const gguf::GgufFile f(ck);
  EXPECT_EQ(f.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(f.get_uint("gemma3.attention.sliding_window"), 8u);
  EXPECT_EQ(f.tensor("blk.1.post_ffw_norm.weight").ne[0], 64u);
  const auto c = continue_config(tmp, ck, 10);
  test_support::expect_exact_resume(tmp / "c", tmp / "d", c, 5);
  const auto back = model::config_from_gguf(gguf::GgufFile(train::weights_path(tmp / "c", 10)));
  EXPECT_EQ(back.sliding_window, 8);
  EXPECT_EQ(back.swa_pattern, 2);
  EXPECT_EQ(back.rope_freq_base_swa, 5000.0);
  EXPECT_EQ(back.rope_scaling_factor, 2.0);
}
