// Optimizer rules, determinism, and checkpoint round trips of the engine.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "support/compare.h"
#include "support/tiny_llama.h"
#include "util/error.h"

#include <cmath>
#include <cstring>

using namespace ggtrain;
using test_support::compare;
using test_support::within_rel_to_max;

namespace {

model::LlamaConfig small_config() { return test_support::tiny_llama(64); }

std::vector<int32_t> pattern_tokens(int64_t n, int64_t vocab, int64_t shift) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 5 + shift) % vocab);
  return t;
}

// A few AdamW steps on a fixed batch; returns the final parameters.
std::vector<float> train_steps(int steps, std::vector<float>* losses = nullptr) {
  auto c = small_config();
  model::LlamaModel<float> m(c, 2, 16);
  model::init_params(c, m.layout(), m.params(), 1234);
  const int64_t n = m.n_params();
  std::vector<float> mom(size_t(n), 0.f), var(size_t(n), 0.f);
  auto in = pattern_tokens(32, c.vocab, 0), tg = pattern_tokens(32, c.vocab, 5);
  for (int s = 1; s <= steps; ++s) {
    float loss = m.forward(in.data(), tg.data());
    if (losses) losses->push_back(loss);
    m.zero_grad();
    m.backward();
    float scale = optim::clip_scale(optim::grad_global_norm(m.grads(), n), 1.0);
    optim::adamw_step(m.layout(), m.params(), m.grads(), mom.data(), var.data(), s, 3e-3, {}, scale);
  }
  return {m.params(), m.params() + n};
}

}  // namespace

TEST(Training, LossFallsOnAFixedBatch) {
  std::vector<float> losses;
  train_steps(30, &losses);
  EXPECT_NEAR(losses.front(), std::log(64.0), 0.1);  // uniform at init
  EXPECT_LT(losses.back(), 0.5 * losses.front());
}

TEST(Training, SameSeedSameThreadsIsBitIdentical) {
  auto a = train_steps(3), b = train_steps(3);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(Training, AdamWDecaysMatricesButNotNorms) {
  auto c = small_config();
  model::ParamLayout layout(c);
  const auto n = size_t(layout.total());
  std::vector<float> p(n, 1.0f), g(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
  optim::AdamWConfig cfg;
  cfg.weight_decay = 0.5f;
  optim::adamw_step(layout, p.data(), g.data(), m.data(), v.data(), 1, 0.1, cfg);
  for (const auto& t : layout.tensors()) {
    const float expect = t.shape.size() == 2 ? 1.0f * float(1.0 - 0.1 * 0.5) : 1.0f;
    EXPECT_EQ(p[size_t(t.offset)], expect) << t.name;
  }
}

TEST(Training, ClipScaleFollowsTorch) {
  EXPECT_EQ(optim::clip_scale(0.5, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(optim::clip_scale(4.0, 1.0), float(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(optim::clip_scale(100.0, 0.0), 1.0f);  // disabled
  std::vector<float> g{3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(optim::grad_global_norm(g.data(), 2), 5.0);
}

TEST(Training, GradientAccumulationEqualsOneBigBatch) {
  // Two micro-batches with loss_scale 1/2 give the gradient of the mean over both.
  auto c = small_config();
  model::LlamaModel<float> big(c, 2, 8), micro(c, 1, 8);
  model::init_params(c, big.layout(), big.params(), 7);
  std::copy(big.params(), big.params() + big.n_params(), micro.params());
  auto in = pattern_tokens(16, c.vocab, 1), tg = pattern_tokens(16, c.vocab, 2);
  big.forward(in.data(), tg.data());
  big.zero_grad();
  big.backward();
  micro.zero_grad();
  for (int k = 0; k < 2; ++k) {
    micro.forward(in.data() + 8 * k, tg.data() + 8 * k);
    micro.backward(0.5f);
  }
  EXPECT_TRUE(within_rel_to_max(compare(micro.grads(), big.grads(), size_t(big.n_params())), 1e-5))
      << "accumulated micro-batch gradients vs the big batch's";
}

TEST(Training, CheckpointRoundTripsThroughGguf) {
  auto c = small_config();
  c.tied = true;
  model::ParamLayout layout(c);
  std::vector<float> p(size_t(layout.total()));
  model::init_params(c, layout, p.data(), 99);
  auto dir = std::filesystem::temp_directory_path() / "ggtrain_ckpt_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.gguf").string();
  gguf::GgufWriter w;
  model::add_llama_model(w, c, layout, p.data());
  w.write(path);

  gguf::GgufFile f(path);
  auto c2 = model::config_from_llama_gguf(f);
  EXPECT_EQ(c2.d_model, c.d_model);
  EXPECT_EQ(c2.n_kv_heads, c.n_kv_heads);
  EXPECT_TRUE(c2.tied);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.tensor("blk.1.attn_k.weight").shape(), (std::vector<uint64_t>{32, 16}));
  std::vector<float> q(size_t(layout.total()), 0.f);
  model::load_llama_params(f, layout, q.data());
  EXPECT_EQ(0, std::memcmp(p.data(), q.data(), p.size() * sizeof(float)));
  std::filesystem::remove_all(dir);
}

TEST(Training, CheckpointLoadRejectsWrongShapes) {
  auto c = small_config();
  model::ParamLayout layout(c);
  std::vector<float> p(size_t(layout.total()), 0.1f);
  auto dir = std::filesystem::temp_directory_path() / "ggtrain_ckpt_test2";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.gguf").string();
  gguf::GgufWriter w;
  model::add_llama_model(w, c, layout, p.data());
  w.write(path);
  auto c2 = c;
  c2.d_ff = 40;
  model::ParamLayout other(c2);
  std::vector<float> q(size_t(other.total()));
  gguf::GgufFile f(path);
  try {
    model::load_llama_params(f, other, q.data());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ffn_gate"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}
