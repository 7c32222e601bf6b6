// GRPO runs end to end (train.objective = "grpo") on completion records
// {"prompt", "answer"} from a small trained model: the step logs TRL's
// metrics and rollouts.jsonl keeps every reply with the reward the test
// recomputes from the reply; rewards that never differ within a group give
// zero loss and zero gradient; the KL to the reference starts at zero; the
// reward a run follows goes up; a run resumes exactly; bad configs are
// refused naming the key.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "gguf/reader.h"
#include "infer/decoder.h"
#include "model/architecture.h"
#include "support/family_shapes.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"

using namespace ggtrain;
using test_support::last_eval;
using test_support::step_record;
using test_support::TempDir;

namespace {

// "Which word is number i?" with its word as the answer.
void write_prompts(const std::string& path, int n) {
  std::ofstream out(path);
  const char* words[] = {"alpha", "beta", "gamma", "delta"};
  for (int i = 0; i < n; ++i)
    out << fmt::format(R"({{"prompt": "Which word is number {}?", "answer": "{}"}})", i % 8, words[i % 4]) << "\n";
}

// The reward: a reply without the letter 'e' (the synthetic English makes
// both kinds common in 8 tokens, so groups differ).
constexpr const char* kNoE = "^[^e]*$";

train::RunConfig grpo_config(TempDir& tmp, const std::string& base, int64_t steps) {
  train::RunConfig c = train::preset("s15");  // the model section comes from init.from
  write_prompts(tmp / "prompts.jsonl", 200);
  c.data.corpus = {tmp / "prompts.jsonl"};
  c.data.format = train::DataFormat::kAuto;
  c.data.val_fraction = 0.05;
  c.init.from = base;
  train::apply_override(c, "train.objective=grpo");
  c.grpo.reward = std::string("regex:") + kNoE;
  c.grpo.group = 4;
  c.grpo.max_tokens = 8;
  c.train.steps = steps;
  c.train.batch = 2;
  c.train.seq_len = 64;
  c.train.threads = 1;
  c.train.eval_every = steps;
  c.train.eval_batches = 1;
  c.train.sample_every = 0;
  c.train.lr_max = 2e-3;
  c.train.warmup_steps = 1;
  c.checkpoint.every = steps;
  return c;
}

std::vector<nlohmann::json> rollouts_of(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/rollouts.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Every reply is logged with the reward the regex gives it here, the
// advantages of a group sum to zero, and the step's metrics are TRL's
// names with the values the rollouts give.
TEST(GrpoRun, LogsRolloutsAndTrlMetrics) {
  TempDir tmp;
  auto c = grpo_config(tmp, test_support::tiny_base_model(tmp.path()), 2);
  test_support::run_quiet(tmp / "run", c, false);
  const auto rollouts = rollouts_of(tmp / "run");
  const std::regex no_e(kNoE);
  std::map<int64_t, std::vector<nlohmann::json>> by_step;
  for (const auto& r : rollouts) by_step[r["step"].get<int64_t>()].push_back(r);
  ASSERT_EQ(by_step.size(), 2u);
  for (const auto& [step, rs] : by_step) {
    const auto m = step_record(tmp / "run", step);
    ASSERT_FALSE(m.is_null());
    ASSERT_EQ(int64_t(rs.size()), m["prompts"].get<int64_t>() * 4) << step;
    double reward = 0, tokens = 0;
    for (size_t i = 0; i < rs.size(); ++i) {
      const std::string completion = rs[i]["completion"];
      EXPECT_EQ(rs[i]["reward"].get<double>(), std::regex_search(completion, no_e) ? 1.0 : 0.0) << completion;
      reward += rs[i]["reward"].get<double>();
      tokens += rs[i]["tokens"].get<double>();
      EXPECT_NE(rs[i]["prompt"].get<std::string>().find("Which word is number"), std::string::npos);
      if (i % 4 == 3) {
        double sum = 0;
        for (size_t j = i - 3; j <= i; ++j) sum += rs[j]["advantage"].get<double>();
        EXPECT_NEAR(sum, 0.0, 1e-9);
      }
    }
    std::printf("step %lld: %zu rollouts, reward %.3f, reply %.2f tokens, loss %.4g, grad_norm %.4g\n", (long long)step,
                rs.size(), m["reward"].get<double>(), m["completion_length"].get<double>(), m["loss"].get<double>(),
                m["grad_norm"].get<double>());
    EXPECT_NEAR(m["reward"].get<double>(), reward / double(rs.size()), 1e-12);
    EXPECT_NEAR(m["completion_length"].get<double>(), tokens / double(rs.size()), 1e-12);
    EXPECT_EQ(m["clip_ratio"].get<double>(), 0.0);  // one pass per batch: the ratio is 1
    EXPECT_TRUE(m.contains("reward_std"));
    EXPECT_FALSE(m.contains("kl"));  // beta = 0: no reference
  }
  const auto v = last_eval(tmp / "run");
  ASSERT_FALSE(v.is_null());
  EXPECT_TRUE(v.contains("val_reward") && v.contains("val_loss"));
  EXPECT_NE(test_support::slurp(tmp / "run/reward.svg").find("validation reward (greedy)"), std::string::npos);
}

// A reward every reply earns: no group differs, every advantage is zero,
// and so are the loss and the gradient (not merely small). The regex run
// above is the negative control: its gradient is not zero.
TEST(GrpoRun, EqualRewardsGiveZeroGradient) {
  TempDir tmp;
  const std::string base = test_support::tiny_base_model(tmp.path());
  auto same = grpo_config(tmp, base, 1);
  same.grpo.reward = "regex:.*";
  test_support::run_quiet(tmp / "same", same, false);
  auto differs = grpo_config(tmp, base, 1);
  test_support::run_quiet(tmp / "differs", differs, false);
  const auto a = step_record(tmp / "same", 1), b = step_record(tmp / "differs", 1);
  ASSERT_FALSE(a.is_null() || b.is_null());
  EXPECT_EQ(a["reward"].get<double>(), 1.0);
  EXPECT_EQ(a["loss"].get<double>(), 0.0);
  EXPECT_EQ(a["grad_norm"].get<double>(), 0.0);
  ASSERT_GT(b["reward_std"].get<double>(), 0.0);
  EXPECT_GT(b["grad_norm"].get<double>(), 1e-4);
}

// With train.grpo.beta the reference is init.from: the first step's policy
// is that model, so the KL estimate is zero to float rounding (decoder vs
// training forward); after updates it grows. The reference must have the
// run's vocabulary: a first GRPO step adds the chat template's tokens.
TEST(GrpoRun, KlToTheReferenceStartsAtZero) {
  TempDir tmp;
  test_support::run_quiet(tmp / "chat", grpo_config(tmp, test_support::tiny_base_model(tmp.path()), 1), false);
  auto c = grpo_config(tmp, train::weights_path(tmp / "chat", 1), 4);
  c.grpo.beta = 0.04;
  c.train.lr_max = 1e-2;
  test_support::run_quiet(tmp / "run", c, false);
  const double first = step_record(tmp / "run", 1)["kl"], last = step_record(tmp / "run", 4)["kl"];
  std::printf("kl: step 1 %.3g, step 4 %.3g\n", first, last);
  ASSERT_TRUE(std::isfinite(first) && std::isfinite(last));
  EXPECT_LT(std::abs(first), 1e-9);  // measured 4.6e-14
  EXPECT_GT(last, 100 * std::max(std::abs(first), 1e-9));
}

// LoRA: the adapter starts at zero, so the first step's policy is the base
// (KL to it zero to rounding: measured 4.6e-14), and the adapter trains
// away from it.
TEST(GrpoRun, LoraTrainsTheAdapter) {
  TempDir tmp;
  test_support::run_quiet(tmp / "chat", grpo_config(tmp, test_support::tiny_base_model(tmp.path()), 1), false);
  auto c = grpo_config(tmp, train::weights_path(tmp / "chat", 1), 3);
  c.train.lora.rank = 4;
  c.grpo.beta = 0.04;
  c.train.lr_max = 1e-2;
  test_support::run_quiet(tmp / "run", c, false);
  const auto first = step_record(tmp / "run", 1), last = step_record(tmp / "run", 3);
  ASSERT_FALSE(first.is_null() || last.is_null());
  std::printf("LoRA: kl step 1 %.3g, step 3 %.3g; grad_norm step 1 %.3g\n", first["kl"].get<double>(),
              last["kl"].get<double>(), first["grad_norm"].get<double>());
  EXPECT_LT(std::abs(first["kl"].get<double>()), 1e-9);
  EXPECT_GT(last["kl"].get<double>(), 1e-6);
  EXPECT_GT(first["grad_norm"].get<double>(), 0.0);
}

// The reward GRPO follows goes up: the mean over the last 5 steps' groups
// against the first 5 (from the same prompts' distribution). Replies that
// contain "ight" (as in "light", "night"): measured 0.21 at first, 1.0 at
// the end; a gradient of the wrong sign drives it to 0.
TEST(GrpoRun, RewardGoesUp) {
  TempDir tmp;
  auto c = grpo_config(tmp, test_support::tiny_base_model(tmp.path()), 30);
  c.grpo.reward = "regex:ight";
  c.train.lr_max = 5e-3;
  test_support::run_quiet(tmp / "run", c, false);
  double first = 0, last = 0;
  for (int64_t s = 1; s <= 5; ++s) {
    first += step_record(tmp / "run", s)["reward"].get<double>() / 5;
    last += step_record(tmp / "run", 25 + s)["reward"].get<double>() / 5;
  }
  std::printf("reward: first 5 steps %.3f, last 5 steps %.3f\n", first, last);
  EXPECT_GT(last, first + 0.5);
}

// Stopped after step 2 and resumed: the same replies (the sampler is seeded
// by step and prompt), the same weights and optimizer state bit for bit.
TEST(GrpoRun, ResumesExactly) {
  TempDir tmp;
  auto c = grpo_config(tmp, test_support::tiny_base_model(tmp.path()), 4);
  c.checkpoint.every = 2;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 2);
  EXPECT_EQ(test_support::slurp(tmp / "a/rollouts.jsonl"), test_support::slurp(tmp / "b/rollouts.jsonl"));
}

// train.grpo.iterations = 2: steps 1 and 3 sample (rollouts.jsonl and the
// reward metrics are theirs), steps 2 and 4 train on those replies again.
// Step 2's loss and clip ratio, written out here in double from the batch
// file's replies, advantages and first-pass log-probabilities and from a
// decoder over step 1's weights: the loss measured 1.4e-8 apart (training
// forward against decoder); limit 1e-5. The test checks that a reuse pass
// taking its ratio as 1 (the first pass's rule) would miss the limit many
// times over. The data stream waits while replies are reused: step 3's
// prompts are those step 2 samples without reuse.
TEST(GrpoRun, IterationsTrainSeveralStepsOnOneBatchOfReplies) {
  TempDir tmp;
  auto c = grpo_config(tmp, test_support::tiny_base_model(tmp.path()), 4);
  c.grpo.iterations = 2;
  c.grpo.epsilon = 0.02;  // a small range, so that step 2 clips some tokens
  c.checkpoint.every = 1;
  c.checkpoint.keep_last = 0;
  test_support::run_quiet(tmp / "run", c, false);
  std::map<int64_t, std::vector<std::string>> prompts_at;
  for (const auto& r : rollouts_of(tmp / "run")) prompts_at[r["step"].get<int64_t>()].push_back(r["prompt"]);
  ASSERT_EQ(prompts_at.size(), 2u);
  EXPECT_TRUE(prompts_at.count(1) && prompts_at.count(3));
  const auto m1 = step_record(tmp / "run", 1), m2 = step_record(tmp / "run", 2);
  ASSERT_FALSE(m1.is_null() || m2.is_null());
  EXPECT_EQ(m1["clip_ratio"].get<double>(), 0.0);  // the first pass: r = 1 exactly
  EXPECT_TRUE(m1.contains("reward") && !m2.contains("reward"));
  EXPECT_EQ(m2["replies_of_step"].get<int64_t>(), 1);

  // Step 2 from the batch file, in double.
  const auto batch = nlohmann::json::parse(test_support::slurp(tmp / "run/grpo/replies-step1-rank0of1.json"));
  gguf::GgufFile f(train::weights_path(tmp / "run", 1));
  infer::Decoder dec(f, c.train.seq_len);
  const int64_t V = dec.config().vocab;
  double loss = 0, clipped = 0, tokens = 0, loss_ratio_one = 0;
  for (const auto& r : batch["rollouts"]) {
    std::vector<int32_t> ids = batch["prompts"][r["prompt"].get<size_t>()]["ids"];
    const std::vector<int32_t> reply = r["reply"];
    const std::vector<double> old = r["old_logp"];
    const double a = r["advantage"];
    const size_t P = ids.size();
    ids.insert(ids.end(), reply.begin(), reply.end() - 1);
    dec.reset();
    dec.eval(ids.data(), int64_t(ids.size()), true);
    for (size_t i = 0; i < reply.size(); ++i) {
      const float* z = dec.logits() + int64_t(P - 1 + i) * V;
      double zmax = z[0], sum = 0;
      for (int64_t v = 0; v < V; ++v) zmax = std::max(zmax, double(z[v]));
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - zmax);
      const double logp = double(z[reply[i]]) - zmax - std::log(sum);
      const double ratio = std::exp(logp - old[i]);
      const double clip = std::clamp(ratio, 1 - c.grpo.epsilon, 1 + c.grpo.epsilon);
      loss += -std::min(ratio * a, clip * a);
      loss_ratio_one += -a;
      clipped += (a > 0 && ratio > 1 + c.grpo.epsilon) || (a < 0 && ratio < 1 - c.grpo.epsilon);
      tokens += 1;
    }
  }
  std::printf("step 2: loss %.9g (written out %.9g), clip ratio %.4f (%.4f)\n", m2["loss"].get<double>(), loss / tokens,
              m2["clip_ratio"].get<double>(), clipped / tokens);
  EXPECT_NEAR(m2["loss"].get<double>(), loss / tokens, 1e-5);
  EXPECT_NEAR(m2["clip_ratio"].get<double>(), clipped / tokens, 1e-12);
  EXPECT_GT(clipped, 0.0);
  EXPECT_GT(std::abs(m2["loss"].get<double>() - loss_ratio_one / tokens), 1e-3);

  // Without reuse, step 2 samples the prompts step 3 samples with it.
  auto once = c;
  once.grpo.iterations = 1;
  once.train.steps = 2;
  test_support::run_quiet(tmp / "once", once, false);
  std::vector<std::string> second;
  for (const auto& r : rollouts_of(tmp / "once"))
    if (r["step"] == 2) second.push_back(r["prompt"]);
  EXPECT_EQ(second, prompts_at[3]);
}

// Stopped after step 1, between the two steps of a batch of replies, and
// resumed: step 2 trains on the batch the file kept; everything after is
// bit-identical to the uninterrupted run. Resumed with another number of
// ranks there, the run names the missing file.
TEST(GrpoRun, ResumesExactlyBetweenStepsOfOneBatch) {
  TempDir tmp;
  auto c = grpo_config(tmp, test_support::tiny_base_model(tmp.path()), 4);
  c.grpo.iterations = 2;
  c.checkpoint.every = 1;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 1);
  EXPECT_EQ(test_support::slurp(tmp / "a/rollouts.jsonl"), test_support::slurp(tmp / "b/rollouts.jsonl"));
  test_support::run_quiet(tmp / "c", c, false, 1);
  std::filesystem::remove(tmp / "c/grpo/replies-step1-rank0of1.json");
  const std::string e = test_support::error_of([&] { test_support::run_quiet(tmp / "c", c, true); });
  EXPECT_NE(e.find("replies-step1-rank0of1.json: missing"), std::string::npos) << e;
}

// The first step's KL per family: measured 3.2e-14 to 4.8e-14 (replies packed
// in rows); a training pass whose attention crosses from one reply into the
// next (no documents) measured 1.9e-5 (qwen35) to 1.9e-4 (olmoe).
constexpr double kFamilyKlLimit = 1e-9;

// Every architecture: a small model of the family (a layer of each of its
// kinds: recurrent mixers, experts, unrotated layers) trained 3 steps, one
// GRPO step (which adds the chat template's tokens), then 2 GRPO steps with
// that model as the KL reference: the decoder samples from the family's
// layers; the first step's KL is zero to rounding, so the training forward
// over replies packed several to a row (each its own document, at other
// positions than the decoder's) scores them as the decoder does; the
// rewards are those of the logged replies; the gradient is finite, and not
// zero where a group's rewards differ.
class GrpoArchitecture : public ::testing::TestWithParam<std::string> {};

TEST_P(GrpoArchitecture, TrainsOnItsOwnReplies) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1200);
  auto b = test_support::tiny_run_config(tmp / "corpus.txt", 3);
  b.model.arch = GetParam();
  b.model.ctx = 128;
  test_support::shape_family_layers(b.model);
  test_support::run_quiet(tmp / "base", b, false);
  test_support::run_quiet(tmp / "chat", grpo_config(tmp, train::weights_path(tmp / "base", 3), 1), false);
  auto c = grpo_config(tmp, train::weights_path(tmp / "chat", 1), 2);
  c.grpo.beta = 0.04;
  test_support::run_quiet(tmp / "run", c, false);
  const std::regex no_e(kNoE);
  for (const auto& r : rollouts_of(tmp / "run"))
    EXPECT_EQ(r["reward"].get<double>(), std::regex_search(r["completion"].get<std::string>(), no_e) ? 1.0 : 0.0);
  for (int64_t step : {1, 2}) {
    const auto m = step_record(tmp / "run", step);
    ASSERT_FALSE(m.is_null()) << step;
    const double loss = m["loss"], norm = m["grad_norm"], kl = m["kl"];
    ASSERT_TRUE(std::isfinite(loss) && std::isfinite(norm) && std::isfinite(kl)) << step;
    if (step == 1) std::printf("%s: first step's kl %.3g\n", GetParam().c_str(), kl);
    if (step == 1) {
      EXPECT_LT(std::abs(kl), kFamilyKlLimit);
    }
    if (m["reward_std"].get<double>() > 0) {
      EXPECT_GT(norm, 0.0) << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GrpoArchitecture, ::testing::ValuesIn(test_support::architecture_names()),
                         [](const auto& info) { return info.param; });

TEST(GrpoRun, BadConfigsNameTheKey) {
  TempDir tmp;
  auto c = grpo_config(tmp, "base.gguf", 2);
  auto error = [&](const std::function<void(train::RunConfig&)>& change) {
    auto bad = c;
    change(bad);
    return test_support::error_of([&] { bad.validate(); });
  };
  EXPECT_NE(error([](auto& b) { b.grpo.group = 1; }).find("train.grpo.group must be >= 2"), std::string::npos);
  EXPECT_NE(error([](auto& b) { b.grpo.reward = ""; }).find("needs a reward"), std::string::npos);
  EXPECT_NE(error([](auto& b) { b.grpo.reward = "regex:(["; }).find("not a valid pattern"), std::string::npos);
  EXPECT_NE(error([](auto& b) { b.data.format = train::DataFormat::kText; }).find("set data.format"),
            std::string::npos);
  EXPECT_NE(error([](auto& b) { b.grpo.max_tokens = 64; }).find("train.grpo.max_tokens"), std::string::npos);
  EXPECT_NE(error([](auto& b) {
              b.grpo.beta = 0.1;
              b.init.from = "";
            }).find("set init.from"),
            std::string::npos);
  EXPECT_NE(error([](auto& b) { b.train.objective = train::Objective::kSft; }).find("only read by"), std::string::npos);
  EXPECT_NE(error([](auto& b) { b.grpo.iterations = 0; }).find("train.grpo.iterations must be >= 1"),
            std::string::npos);
}

}  // namespace
