// bf16 mixed precision through a whole run (train.precision = bf16): 300
// steps of the tiny preset against the fp32 run's loss curve (smoothed
// losses within 2%); checkpoints stay F32.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "gguf/reader.h"
#include "support/compare.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using test_support::compare;
using test_support::Comparison;
using test_support::TempDir;
using test_support::Tolerance;
using test_support::within_elementwise;

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
