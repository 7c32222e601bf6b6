// bf16 mixed precision (train.precision = bf16): the model's logits and
// gradients against the fp32 model's, and 300 steps of the tiny preset against
// the fp32 run's loss curve (smoothed losses within 2%); checkpoints stay F32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "gguf/reader.h"
#include "kernels/number_formats.h"
#include "model/init.h"
#include "model/transformer.h"
#include "quant/type_traits.h"
#include "support/compare.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using test_support::compare;
using test_support::Comparison;
using test_support::differs_by_more_than;
using test_support::TempDir;
using test_support::Tolerance;
using test_support::within_elementwise;
using test_support::within_rel_l2;
using test_support::within_rel_to_max;

namespace {

std::vector<double> smoothed_losses(const std::string& run_dir, int window) {
  std::map<int64_t, double> by_step;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) by_step[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  std::vector<double> losses, out;
  for (const auto& [step, l] : by_step) losses.push_back(l);
  for (size_t i = 0; i + size_t(window) <= losses.size(); ++i) {
    double s = 0;
    for (int k = 0; k < window; ++k) s += losses[i + size_t(k)];
    out.push_back(s / window);
  }
  return out;
}

}  // namespace

TEST(Bf16, ModelLogitsAndGradientsFollowFp32) {
  model::Config c;
  c.vocab = 300;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 160;
  c.ctx = 64;
  const int64_t B = 2, T = 64;
  model::ModelOptions o;
  o.precision = model::Precision::kBf16;
  o.logit_chunk_rows = 50;
  model::Transformer<float> fp(c, B, T), bf(c, B, T, {}, o);
  model::init_params(c, fp.layout(), fp.params(), 9, 0.1);
  std::copy(fp.params(), fp.params() + fp.n_params(), bf.params());
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T));
  for (size_t i = 0; i < in.size(); ++i) in[i] = int32_t((i * 37 + 1) % 300), tg[i] = int32_t((i * 11 + 5) % 300);
  fp.forward(in.data(), nullptr);
  bf.forward(in.data(), nullptr);
  const Comparison logits = compare(bf.logits(), fp.logits(), size_t(B * T * c.vocab));
  EXPECT_TRUE(within_rel_to_max(logits, 3e-2)) << "bf16 logits vs fp32";
  EXPECT_TRUE(differs_by_more_than(logits, 0.0)) << "it did run in bf16";
  const float lf = fp.forward(in.data(), tg.data()), lb = bf.forward(in.data(), tg.data());
  EXPECT_NEAR(lb, lf, 5e-3 * lf);
  fp.zero_grad();
  bf.zero_grad();
  fp.backward();
  bf.backward();
  for (const auto& t : fp.layout().tensors()) {  // relative L2 error of the tensor's gradient
    const Comparison g = compare(bf.grads() + t.offset, fp.grads() + t.offset, size_t(t.size));
    EXPECT_TRUE(within_rel_l2(g, 5e-2)) << t.name;
  }
}

TEST(Bf16, TinyLossCurveWithin2PercentOfFp32) {
  TempDir tmp("ggtrain_bf16");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 3000);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 300);
  c.train.warmup_steps = 20;
  c.train.eval_every = 100;
  c.checkpoint.every = 300;
  test_support::run_quiet(tmp / "fp32", c, false);
  c.train.precision = model::Precision::kBf16;
  const auto s = test_support::run_quiet(tmp / "bf16", c, false);
  EXPECT_EQ(s.last_step, 300);
  const auto a = smoothed_losses(tmp / "fp32", 20), b = smoothed_losses(tmp / "bf16", 20);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 281u);
  const Comparison losses = compare(b, a);
  std::printf("bf16 vs fp32, 300 tiny steps: worst smoothed (20-step mean) loss difference %.3f%%, "
              "final %.4f vs %.4f\n",
              100 * losses.max_elementwise_rel(), b.back(), a.back());
  EXPECT_TRUE(within_elementwise(losses, Tolerance{.rel = 0.02})) << "smoothed losses, bf16 vs fp32";
  EXPECT_LT(a.back(), 0.8 * a.front());  // it learned something
  gguf::GgufFile f(train::weights_path(tmp / "bf16", 300));
  for (const auto& t : f.tensors()) EXPECT_EQ(t.type, gguf::TensorType::F32) << t.name;
}
