// NaN/Inf in the loss or the gradient norm, injected with
// GGTRAIN_INJECT_NAN_AT_STEP: policy "stop" ends the run with a clear error
// and keeps the last checkpoint; policy "skip" leaves weights and moments
// untouched for that step, counts it in metrics.jsonl, and stops after
// train.max_nonfinite such steps in a row.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace ggtrain;
using namespace ggtrain::test_support;

namespace {

// Sets the injection variables for one scope.
class Inject {
 public:
  explicit Inject(const std::string& steps, const std::string& into = "loss") {
    ::setenv("GGTRAIN_INJECT_NAN_AT_STEP", steps.c_str(), 1);
    ::setenv("GGTRAIN_INJECT_NAN_INTO", into.c_str(), 1);
  }
  ~Inject() {
    ::unsetenv("GGTRAIN_INJECT_NAN_AT_STEP");
    ::unsetenv("GGTRAIN_INJECT_NAN_INTO");
  }
};

train::TrainSummary train_run(const std::string& dir, const train::RunConfig& c, bool resume = false,
                              int64_t stop_at = 0) {
  train::TrainOptions o;
  o.run_dir = dir;
  o.config = c;
  o.resume = resume;
  o.quiet = true;
  o.stop_at = stop_at;
  return train::run_training(o);
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

}  // namespace

TEST(NonFinite, StopPolicyEndsTheRunAndKeepsTheLastCheckpoint) {
  TempDir tmp;
  write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = tiny_run_config(tmp / "corpus.txt", 30);  // checkpoints every 10 steps
  ASSERT_EQ(c.train.on_nonfinite, train::NonfinitePolicy::kStop);  // the default
  for (const char* into : {"loss", "grad"}) {
    const std::string dir = tmp / (std::string("r_") + into);
    Inject inject("15", into);
    const std::string msg = error_of([&] { train_run(dir, c); });
    EXPECT_HAS(msg, "step 15: loss ");
    EXPECT_HAS(msg, std::string(into) == "loss" ? "loss nan" : "gradient norm inf");
    EXPECT_HAS(msg, "is not finite; stopping (train.on_nonfinite = \"stop\")");
    EXPECT_HAS(msg, "the last checkpoint " + train::weights_path(dir, 10) + " is intact");
    EXPECT_EQ(train::latest_step(dir), 10);
    // The kept checkpoint resumes (and, without the fault, runs to the end).
    ::unsetenv("GGTRAIN_INJECT_NAN_AT_STEP");
    EXPECT_EQ(train_run(dir, train::saved_run_config(dir), true).last_step, 30);
  }
}

TEST(NonFinite, StopPolicyExitsNonZeroFromTheCli) {
  TempDir tmp;
  write_synthetic_corpus(tmp / "corpus.txt", 600);
  CliOptions o;
  o.env = {{"GGTRAIN_INJECT_NAN_AT_STEP", "3"}};
  auto r = run_cli(tiny_train_args(GGTRAIN_BIN, tmp / "r", tmp / "corpus.txt", {"train.steps=10"}), tmp / "out.txt", o);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_HAS(error_line(r.output), "step 3: loss nan");
  EXPECT_HAS(error_line(r.output), "there is no checkpoint yet");
}

TEST(NonFinite, SkipPolicyLeavesWeightsAndMomentsUntouchedAndCountsTheStep) {
  TempDir tmp;
  write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = tiny_run_config(tmp / "corpus.txt", 12);
  c.train.on_nonfinite = train::NonfinitePolicy::kSkip;
  c.checkpoint.every = 1;
  train::TrainSummary sum;
  {
    Inject inject("5,9");
    sum = train_run(tmp / "r", c);
  }
  EXPECT_EQ(sum.last_step, 12);
  EXPECT_EQ(sum.nonfinite_steps, 2);
  std::string why;
  // Step 5 was skipped: its checkpoint equals step 4's, weights and moments.
  EXPECT_TRUE(same_tensor_data(train::weights_path(tmp / "r", 4), train::weights_path(tmp / "r", 5), &why)) << why;
  EXPECT_TRUE(same_tensor_data(train::state_path(tmp / "r", 4), train::state_path(tmp / "r", 5), &why)) << why;
  EXPECT_FALSE(same_tensor_data(train::weights_path(tmp / "r", 5), train::weights_path(tmp / "r", 6), &why));
  // AdamW's update count (its bias corrections' t) skips them too, as
  // torch.optim's state["step"] does when GradScaler skips a step.
  auto updates = [&](int64_t step) {
    return gguf::GgufFile(train::state_path(tmp / "r", step)).get_uint(train::kAdamStepsKey);
  };
  EXPECT_EQ(updates(4), 4u);
  EXPECT_EQ(updates(5), 4u);
  EXPECT_EQ(updates(12), 10u);
  // metrics.jsonl: the skipped steps say so, with the running count.
  int skipped = 0;
  for (const auto& m : test_support::metrics_records(tmp / "r")) {
    if (!m.contains("skipped")) continue;
    ++skipped;
    EXPECT_TRUE(m["loss"].is_null()) << m.dump();
    EXPECT_EQ(m["nonfinite_steps"].get<int>(), skipped) << m.dump();
    EXPECT_EQ(m["nonfinite_in_a_row"].get<int>(), 1) << m.dump();
    EXPECT_EQ(m["step"].get<int>(), skipped == 1 ? 5 : 9) << m.dump();
  }
  EXPECT_EQ(skipped, 2);
}

TEST(NonFinite, SkipPolicyResumesAfterSkippedSteps) {
  // metrics.jsonl with null losses must not trouble a resumed run.
  TempDir tmp;
  write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = tiny_run_config(tmp / "corpus.txt", 20);
  c.train.on_nonfinite = train::NonfinitePolicy::kSkip;
  {
    Inject inject("3-4");
    train_run(tmp / "r", c, false, 10);
  }
  EXPECT_EQ(train_run(tmp / "r", train::saved_run_config(tmp / "r"), true).last_step, 20);
  EXPECT_EQ(test_support::metrics_records(tmp / "r").size(), 20u + 2u);  // 20 steps + 2 evaluations
  // Exactly where the run without the stop ends: the resume restored 8
  // updates taken by step 10, not 10.
  {
    Inject inject("3-4");
    train_run(tmp / "whole", c);
  }
  std::string why;
  EXPECT_TRUE(same_tensor_data(train::weights_path(tmp / "whole", 20), train::weights_path(tmp / "r", 20), &why))
      << why;
}

TEST(NonFinite, SkipPolicyStopsAfterMaxNonfiniteInARow) {
  TempDir tmp;
  write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = tiny_run_config(tmp / "corpus.txt", 30);
  c.train.on_nonfinite = train::NonfinitePolicy::kSkip;
  c.train.max_nonfinite = 3;
  {
    Inject inject("12,13,15,16", "grad");  // never 3 in a row: the run completes
    EXPECT_EQ(train_run(tmp / "ok", c).nonfinite_steps, 4);
  }
  Inject inject("12-14");
  const std::string msg = error_of([&] { train_run(tmp / "r", c); });
  EXPECT_HAS(msg, "step 14: loss nan");
  EXPECT_HAS(msg, "3 non-finite steps in a row (train.max_nonfinite = 3); stopping");
  EXPECT_HAS(msg, "the last checkpoint " + train::weights_path(tmp / "r", 10) + " is intact");
  EXPECT_EQ(train::latest_step(tmp / "r"), 10);
}

TEST(NonFinite, ConfigKeysAreValidatedAndRoundTrip) {
  auto c = train::preset("tiny");
  train::apply_override(c, "train.on_nonfinite=skip");
  train::apply_override(c, "train.max_nonfinite=4");
  train::RunConfig back = train::preset("s15");
  train::apply_toml(back, train::to_toml(c), "test");
  EXPECT_EQ(back.train.on_nonfinite, train::NonfinitePolicy::kSkip);
  EXPECT_EQ(back.train.max_nonfinite, 4);
  EXPECT_HAS(error_of([&] { train::apply_override(c, "train.on_nonfinite=ignore"); }),
             "train.on_nonfinite must be stop or skip, got \"ignore\"");
  c.train.on_nonfinite = train::NonfinitePolicy::kSkip;
  c.train.max_nonfinite = 0;
  EXPECT_HAS(error_of([&] { c.validate(); }), "train.max_nonfinite must be at least 1");
  ::setenv("GGTRAIN_INJECT_NAN_AT_STEP", "5-x", 1);
  TempDir tmp;
  write_synthetic_corpus(tmp / "corpus.txt", 100);
  EXPECT_HAS(error_of([&] { train_run(tmp / "r", tiny_run_config(tmp / "corpus.txt", 2)); }),
             "GGTRAIN_INJECT_NAN_AT_STEP='5-x'");
  ::unsetenv("GGTRAIN_INJECT_NAN_AT_STEP");
}
