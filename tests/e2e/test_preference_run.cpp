// Preference runs end to end (data.format = "preference"): each objective
// learns the preferred answer, the loss is the mean over the step's pairs
// however the step is split, DPO's reference is computed once and refused
// when init.from changed, a LoRA run's reference is its base model's, and a
// preference run resumes exactly.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "corpus/batch_loader.h"
#include "corpus/prepare/manifest.h"
#include "corpus/token_file.h"
#include "gguf/reader.h"
#include "kernels/cross_entropy.h"
#include "model/config.h"
#include "model/quantized_base.h"
#include "model/transformer.h"
#include "quant/gguf_floats.h"
#include "support/compare.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "train/preference_reference.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::last_eval;
using test_support::step_record;
using test_support::TempDir;

namespace {

// "Which word is number i?": chosen the word, rejected the next one; every
// third record in the chat-style shape (messages + an assistant message).
void write_pairs(const std::string& path, int n) {
  std::ofstream out(path);
  const char* words[] = {"alpha", "beta", "gamma", "delta"};
  for (int i = 0; i < n; ++i) {
    const char* good = words[i % 4];
    const char* bad = words[(i + 1 + i / 4 % 3) % 4];
    if (i % 3 == 2)
      out << fmt::format(
          R"({{"messages": [{{"role": "user", "content": "Which word is number {}?"}}], )"
          R"("chosen": {{"role": "assistant", "content": "{}"}}, "rejected": [{{"role": "assistant", "content": "{}"}}]}})",
          i % 4, good, bad);
    else
      out << fmt::format(R"({{"prompt": "Which word is number {}?", "chosen": "{}", "rejected": "{}"}})", i % 4, good,
                         bad);
    out << "\n";
  }
}

// The tiny preset with room for a chat, 10 steps on the synthetic corpus.
std::string base_model(TempDir& tmp, const std::string& name = "base", int64_t steps = 10) {
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1200);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", steps);
  c.model.ctx = 128;
  test_support::run_quiet(tmp / name, c, false);
  return train::weights_path(tmp / name, steps);
}

train::RunConfig pref_config(TempDir& tmp, const std::string& base, const std::string& objective, int64_t steps) {
  train::RunConfig c = train::preset("s15");  // the model section comes from init.from
  write_pairs(tmp / "pairs.jsonl", 240);
  c.data.corpus = {tmp / "pairs.jsonl"};
  c.data.format = train::DataFormat::kPreference;
  c.data.val_fraction = 0.1;
  c.init.from = base;
  train::apply_override(c, "train.objective=" + objective);
  c.train.beta = objective == "simpo" ? 2.0 : 0.5;
  c.train.steps = steps;
  c.train.batch = 4;
  c.train.seq_len = 128;
  c.train.threads = 1;
  c.train.eval_every = steps;
  c.train.eval_batches = 2;
  c.train.sample_every = 0;
  c.train.lr_max = 2e-3;
  c.train.warmup_steps = 2;
  c.checkpoint.every = 5;
  return c;
}

class ObjectiveRun : public ::testing::TestWithParam<const char*> {};

// 100 steps: the held-out pairs' reward accuracy ends above 0.8 (chance is
// 0.5; measured over 16 pairs: DPO 0.94, IPO, ORPO and SimPO 1.0) and their
// margin above the first step's (the starting weights').
TEST_P(ObjectiveRun, LearnsThePreferredAnswer) {
  TempDir tmp;
  const std::string base = base_model(tmp);
  auto c = pref_config(tmp, base, GetParam(), 100);
  c.train.lr_max = 5e-3;
  c.train.lr_min = 1e-3;
  c.train.eval_batches = 6;  // every held-out pair (24, one per window)
  test_support::run_quiet(tmp / "run", c, false);
  const nlohmann::json first = step_record(tmp / "run", 1), v = last_eval(tmp / "run");
  ASSERT_FALSE(first.is_null());
  ASSERT_FALSE(v.is_null());
  for (const char* key : {"rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
                          "logps/rejected", "pairs"})
    EXPECT_TRUE(first.contains(key)) << key;
  EXPECT_GT(first["pairs"].get<int64_t>(), 0);
  EXPECT_GT(v["val_rewards/accuracies"].get<double>(), 0.8) << v.dump();
  EXPECT_GT(v["val_rewards/margins"].get<double>(), first["rewards/margins"].get<double>()) << v.dump();
  EXPECT_TRUE(std::isfinite(v["val_loss"].get<double>()));
  if (std::string(GetParam()) == "dpo" || std::string(GetParam()) == "ipo") {
    // The starting weights are the reference: rewards start at exactly 0.
    EXPECT_EQ(first["rewards/chosen"].get<double>(), 0.0);
    EXPECT_TRUE(std::filesystem::exists(tmp / "run/data/reference-train.bin"));
  }
}

INSTANTIATE_TEST_SUITE_P(Objectives, ObjectiveRun, ::testing::Values("dpo", "ipo", "orpo", "simpo"));

// The objective is the mean over the step's pairs: one batch of 4 windows
// and two micro-batches of 2 give the same loss and the same update.
TEST(PreferenceRun, BatchEqualsMicroBatches) {
  TempDir tmp;
  const std::string base = base_model(tmp);
  train::RunConfig one = pref_config(tmp, base, "dpo", 2), two = one;
  two.train.batch = 2;
  two.train.grad_accum = 2;
  test_support::run_quiet(tmp / "one", one, false);
  test_support::run_quiet(tmp / "two", two, false);
  for (int64_t step : {1, 2}) {
    const double l1 = step_record(tmp / "one", step)["loss"], l2 = step_record(tmp / "two", step)["loss"];
    ASSERT_TRUE(std::isfinite(l1) && std::isfinite(l2));
    EXPECT_NEAR(l1, l2, 1e-5 * std::abs(l1)) << "step " << step;
    // The gradient too, before AdamW's normalisation could hide a wrong
    // scale of the accumulated micro-batches' weights.
    const double g1 = step_record(tmp / "one", step)["grad_norm"], g2 = step_record(tmp / "two", step)["grad_norm"];
    ASSERT_TRUE(std::isfinite(g1) && g1 > 0 && std::isfinite(g2));
    std::printf("step %lld: grad_norm %.9g (one batch) vs %.9g (two micro-batches)\n", (long long)step, g1, g2);
    EXPECT_NEAR(g1, g2, 1e-5 * g1) << "step " << step;
  }
  const gguf::GgufFile a(train::weights_path(tmp / "one", 2)), b(train::weights_path(tmp / "two", 2));
  const auto fa = quant::tensor_floats(a, a.tensor("blk.0.attn_q.weight")),
             fb = quant::tensor_floats(b, b.tensor("blk.0.attn_q.weight"));
  ASSERT_EQ(fa.size(), fb.size());
  EXPECT_TRUE(test_support::within_abs(test_support::compare(fa.data(), fb.data(), fa.size()), 1e-5));
  // Control: a step of half the pairs (batch 2, no accumulation) moves the loss.
  train::RunConfig half = one;
  half.train.batch = 2;
  test_support::run_quiet(tmp / "half", half, false);
  EXPECT_GT(std::abs(double(step_record(tmp / "half", 2)["loss"]) - double(step_record(tmp / "one", 2)["loss"])), 1e-4);
}

TEST(PreferenceRun, ResumesExactly) {
  TempDir tmp;
  const std::string base = base_model(tmp);
  test_support::expect_exact_resume(tmp / "a", tmp / "b", pref_config(tmp, base, "dpo", 10), 5);
}

// The reference comes from init.from: a resume whose init.from now holds
// other weights is refused, naming the reference file.
TEST(PreferenceRun, ReferenceRefusedWhenInitFromChanged) {
  TempDir tmp;
  const std::string base = base_model(tmp);
  const std::string other = base_model(tmp, "other", 12);
  const auto c = pref_config(tmp, base, "dpo", 10);
  test_support::run_quiet(tmp / "run", c, false, 5);
  std::filesystem::copy_file(other, base, std::filesystem::copy_options::overwrite_existing);
  const std::string err = test_support::error_of([&] { test_support::run_quiet(tmp / "run", c, true); });
  EXPECT_NE(err.find("reference-train.bin"), std::string::npos) << err;
  EXPECT_NE(err.find("another init.from"), std::string::npos) << err;
}

// With LoRA the reference is the base without the adapter: the token
// losses the run stored equal, bit for bit, those of the base model alone
// on the same windows.
TEST(PreferenceRun, LoraReferenceIsTheBaseModel) {
  TempDir tmp;
  const std::string first = base_model(tmp);
  // A base that already knows the chat markers (a LoRA run adds none).
  test_support::run_quiet(tmp / "full", pref_config(tmp, first, "simpo", 5), false);
  const std::string base = train::weights_path(tmp / "full", 5);
  auto c = pref_config(tmp, base, "dpo", 2);
  c.train.lora.rank = 4;
  c.train.lora.targets = {"attn_q", "attn_v", "ffn_down"};
  test_support::run_quiet(tmp / "lora", c, false);

  const gguf::GgufFile f(base);
  const model::Config mc = model::config_from_gguf(f);
  const int64_t B = c.train.batch, T = c.train.seq_len;
  model::Transformer<float> m(mc, B, T);
  model::load_base_params(f, mc, m.layout(), m.params());
  const auto prepared = corpus::read_manifest(tmp / "lora/data");
  ASSERT_TRUE(prepared);
  const corpus::TokenStream tokens(prepared->train_paths(tmp / "lora/data"));
  const corpus::TokenStream flags(prepared->train_flag_paths(tmp / "lora/data"));
  const corpus::BatchLoader windows(tokens, T, 1, {&flags, -1});
  const train::ReferenceSource source{model::base_fingerprint(f), train::token_stream_fingerprint(tokens), T};
  const auto ref = train::read_reference(tmp / "lora/data/reference-train.bin", source, tokens.size());
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T)), ds(size_t(B * T));
  int64_t compared = 0, differing = 0;
  for (int64_t w0 = 0; w0 + B <= windows.n_windows(); w0 += B) {
    for (int64_t b = 0; b < B; ++b) windows.window(w0 + b, in.data() + b * T, tg.data() + b * T, ds.data() + b * T);
    m.forward_scores(in.data(), tg.data(), ds.data());
    for (int64_t i = 0; i < B * T; ++i) {
      if (tg[size_t(i)] == corpus::kNoTarget) continue;
      ++compared;
      differing += m.token_losses()[i] != ref[size_t(w0 * T + i + 1)];
    }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_EQ(differing, 0) << "of " << compared;
}

TEST(PreferenceRun, ConfigRefusesMismatches) {
  train::RunConfig c = train::preset("tiny");
  c.data.corpus = {"pairs.jsonl"};
  c.data.format = train::DataFormat::kPreference;
  EXPECT_NE(test_support::error_of([&] { c.validate(); }).find("needs a preference objective"), std::string::npos);
  c.train.objective = train::Objective::kDpo;
  EXPECT_NE(test_support::error_of([&] { c.validate(); }).find("set init.from"), std::string::npos);
  c.train.objective = train::Objective::kOrpo;
  EXPECT_EQ(test_support::error_of([&] { c.validate(); }), "");
  c.data.format = train::DataFormat::kChat;
  EXPECT_NE(test_support::error_of([&] { c.validate(); }).find("set data.format = \"preference\""), std::string::npos);
}

}  // namespace
