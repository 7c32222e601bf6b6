// Whole training runs: checkpoints, the `latest` link, exact resume and its
// checks, validation, in-loop task scores and the best checkpoint, on a
// synthetic corpus.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "corpus/token_file.h"
#include "eval/choice_score.h"
#include "eval/choice_tasks.h"
#include "gguf/reader.h"
#include "infer/decoder.h"
#include "model/params.h"
#include "support/capture.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "tokenizer/tokenizer.h"
#include "train/best_checkpoint.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::TempDir;

TEST(Run, ResumeIsBitIdenticalToAnUninterruptedRun) {
  TempDir tmp("ggtrain_resume");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1500);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 30);
  test_support::run_quiet(tmp / "a", c, false);
  test_support::run_quiet(tmp / "b", c, false, 10);
  ASSERT_EQ(train::latest_step(tmp / "b"), 10);
  test_support::run_quiet(tmp / "b", c, true, 20);
  ASSERT_EQ(train::latest_step(tmp / "b"), 20);
  auto s = test_support::run_quiet(tmp / "b", c, true);
  EXPECT_EQ(s.last_step, 30);
  std::string why;
  EXPECT_TRUE(
      test_support::same_tensor_data(train::weights_path(tmp / "a", 30), train::weights_path(tmp / "b", 30), &why))
      << why;
  EXPECT_TRUE(test_support::same_tensor_data(train::state_path(tmp / "a", 30), train::state_path(tmp / "b", 30), &why))
      << why;
  test_support::expect_same_data_position(train::state_path(tmp / "a", 30), train::state_path(tmp / "b", 30));
  test_support::expect_same_data_position(train::state_path(tmp / "a", 20), train::state_path(tmp / "b", 20));
  // The metrics of the resumed run continue the same curve, step for step.
  test_support::expect_same_metrics(tmp / "a", tmp / "b");
}

// Bits per byte of validation: the loss's total in bits over the bytes of
// the targets' texts. Counted here from the validation token file (window w
// predicts tokens w*T+1 .. w*T+T) and the GGUF's own token list (a piece's
// bytes with U+2581 as a space, byte tokens one byte, control tokens none).
TEST(Run, ValidationReportsBitsPerByteOfThePredictedText) {
  TempDir tmp("ggtrain_bpb");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1500);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 10);
  c.train.eval_batches = 3;
  test_support::run_quiet(tmp / "r", c, false);

  gguf::GgufFile f(train::weights_path(tmp / "r", 10));
  const auto& pieces = f.find("tokenizer.ggml.tokens")->items;
  const auto& types = f.find("tokenizer.ggml.token_type")->items;
  auto bytes_of = [&](int32_t id) -> double {
    const std::string& p = pieces[size_t(id)].s;
    switch (types[size_t(id)].i) {
      case 1: {  // normal: each U+2581 (3 bytes) is one space
        size_t n = p.size();
        for (size_t at = p.find("\xe2\x96\x81"); at != std::string::npos; at = p.find("\xe2\x96\x81", at + 3)) n -= 2;
        return double(n);
      }
      case 4: return double(p.size());  // user-defined: as written
      case 6: return 1;  // <0xNN>
      default: return 0;
    }
  };
  corpus::TokenFile val(tmp / "r/data/val-00000.tok");
  const int64_t T = c.train.seq_len, windows = c.train.eval_batches * c.train.batch;
  ASSERT_GE((val.size() - 1) / T, windows) << "the validation text is shorter than the test assumes";
  double bytes = 0;
  for (int64_t w = 0; w < windows; ++w)
    for (int64_t t = 1; t <= T; ++t) bytes += bytes_of(val[w * T + t]);

  std::ifstream in(tmp / "r/metrics.jsonl");
  std::string line;
  int evals = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("val_loss")) continue;
    ++evals;
    const double loss = j["val_loss"].get<double>(), bpb = j["val_bpb"].get<double>();
    const double expected = loss * double(windows * T) / std::log(2.0) / bytes;
    EXPECT_NEAR(bpb, expected, 1e-12 * expected) << line;
    EXPECT_GT(bpb, 0);
  }
  EXPECT_EQ(evals, 1);
}

// train.eval_tasks: the record at step 20 is what `eval --task` (fp32
// cache, the in-memory decoder's) gives on that step's checkpoint; the
// step-10 checkpoint gives another (the weights of the step are scored).
TEST(Run, TasksScoredInTheLoopEqualTheSavedCheckpointsScores) {
  TempDir tmp("ggtrain_tasks");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 800);
  std::vector<std::string> lines;
  {
    std::ifstream in(tmp / "corpus.txt");
    for (std::string l; std::getline(in, l) && lines.size() < 40;) lines.push_back(l);
  }
  {
    std::ofstream out(tmp / "tasks.jsonl");
    for (size_t i = 0; i + 1 < 30; i += 2)
      out << nlohmann::json{{"context", lines[i]},
                            {"endings", {lines[i + 1], lines[i + 9], lines[i + 5]}},
                            {"label", i % 3 == 0 ? 0 : 1}}
                 .dump()
          << "\n";
  }
  // The same tasks under another name (an extension that says nothing) with
  // their own format, cadence and limit, given as --set writes them.
  std::filesystem::copy_file(tmp / "tasks.jsonl", tmp / "own.tasks");
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 30);
  c.model.ctx = 256;
  train::apply_override(
      c, "train.eval_tasks=" + (tmp / "tasks.jsonl") + "," + (tmp / "own.tasks") + "@format=jsonl@every=15@limit=4");
  c.train.eval_tasks_every = 20;
  c.train.eval_tasks_limit = 10;
  test_support::run_quiet(tmp / "r", c, false);

  std::map<int64_t, nlohmann::json> records, own;
  std::ifstream in(tmp / "r/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("task")) continue;
    (j["task"].get<std::string>().ends_with("own.tasks") ? own : records)[j["step"].get<int64_t>()] = j;
  }
  ASSERT_EQ(records.size(), 3u);  // steps 0 (the starting weights), 20 and 30 (the end)
  ASSERT_TRUE(records.count(0) && records.count(20));
  ASSERT_EQ(own.size(), 3u);  // steps 0, 15 and 30
  ASSERT_TRUE(own.count(0) && own.count(15) && own.count(30));
  EXPECT_EQ(own[15]["tasks"].get<size_t>(), 4u);
  // The saved config keeps both entries as written.
  EXPECT_NE(test_support::slurp(tmp / "r/config.toml").find("format = 'jsonl', every = 15, limit = 4}"),
            std::string::npos);
  // tasks.svg draws each task file's acc_norm against step.
  EXPECT_NE(test_support::slurp(tmp / "r/tasks.svg").find("tasks.jsonl"), std::string::npos);
  auto score = [&](int64_t step) {
    gguf::GgufFile f(train::weights_path(tmp / "r", step));
    infer::Decoder dec(f, 256, kernels::CacheType::kF32);
    const auto tasks = eval::draw_tasks(eval::read_choice_tasks(tmp / "tasks.jsonl", eval::TaskFormat::kJsonl), 10);
    return eval::score_choice_tasks(dec, tokenizer::Tokenizer::from_gguf(f), tasks);
  };
  const auto& rec = records[20];
  const auto r20 = score(20);
  EXPECT_EQ(rec["tasks"].get<size_t>(), 10u);
  EXPECT_EQ(rec["acc"].get<double>(), r20.acc);
  EXPECT_EQ(rec["acc_norm"].get<double>(), r20.acc_norm);
  EXPECT_EQ(rec["gold_logprob"].get<double>(), r20.gold_logprob);
  EXPECT_NE(rec["gold_logprob"].get<double>(), score(10).gold_logprob);
}

// checkpoint.keep_best = val_loss, validated on the corpus's lines with
// their words reversed, which the model learns and then unlearns as it
// learns the forward order: weights/best.gguf follows the lowest loss
// in metrics.jsonl, is kept past keep_last, and holds that step's weights.
TEST(Run, KeepBestFollowsTheLowestValidationLoss) {
  TempDir tmp("ggtrain_best");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1500);
  test_support::write_reversed_lines(tmp / "corpus.txt", tmp / "reversed.txt", 400);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 60);
  c.data.val_corpus = {tmp / "reversed.txt"};
  c.train.eval_every = 4;
  c.train.lr_max = 0.01;
  c.train.lr_min = 0.01;
  c.train.schedule = optim::ScheduleKind::Constant;
  c.checkpoint.every = 20;
  c.checkpoint.keep_last = 1;
  c.checkpoint.keep_best = "val_loss";
  test_support::run_quiet(tmp / "r", c, false);

  int64_t best_step = -1;
  double best = INFINITY;
  std::ifstream in(tmp / "r/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss") && j["val_loss"].get<double>() < best) {
      best = j["val_loss"].get<double>();
      best_step = j["step"].get<int64_t>();
    }
  }
  ASSERT_GT(best_step, 0);
  EXPECT_LT(best_step, 60) << "the loss never rose: the test does not test keeping an older step";
  EXPECT_NE(best_step % 20, 0) << "the best is a regular checkpoint: the test does not test the extra one";
  EXPECT_EQ(std::filesystem::read_symlink(tmp / "r/weights/best.gguf").string(),
            "step_" + std::to_string(best_step) + ".gguf");
  const auto rec = train::read_best(tmp / "r");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->metric, "val_loss");
  EXPECT_EQ(rec->step, best_step);
  EXPECT_EQ(rec->value, best);
  gguf::GgufFile f(tmp / "r/weights/best.gguf");
  EXPECT_EQ(f.get_uint("general.step"), uint64_t(best_step));
  EXPECT_EQ(train::latest_step(tmp / "r"), 60);
}

TEST(Run, CheckpointsAreLlamaModelsWithARelativeLatestLink) {
  TempDir tmp("ggtrain_ckpt");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 800);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 30);
  c.checkpoint.keep_last = 2;
  test_support::run_quiet(tmp / "r", c, false);
  EXPECT_EQ(std::filesystem::read_symlink(tmp / "r/weights/latest").string(), "step_30.gguf");
  EXPECT_FALSE(std::filesystem::exists(tmp / "r/weights/step_10.gguf"));  // pruned
  EXPECT_FALSE(std::filesystem::exists(tmp / "r/state/step_10.gguf"));
  EXPECT_TRUE(std::filesystem::exists(tmp / "r/weights/step_20.gguf"));
  EXPECT_TRUE(std::filesystem::exists(tmp / "r/loss.svg"));
  gguf::GgufFile f(tmp / "r/weights/latest");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("general.step"), 30u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.tensors().size(), 2u + 9u * 2u + 1u);  // embd, 2 blocks, out_norm, output
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(t.name.find("adam"), std::string::npos);  // llama.cpp rejects extra tensors
    EXPECT_EQ(t.type, gguf::TensorType::F32);
  }
  // llama.cpp prints byte pieces literally unless their type is 6 (byte).
  const auto& tokens = f.find("tokenizer.ggml.tokens")->items;
  const auto& types = f.find("tokenizer.ggml.token_type")->items;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i].s.rfind("<0x", 0) == 0) {
      EXPECT_EQ(types[i].i, 6) << tokens[i].s;
    }
}

TEST(Run, FreshRunRefusesAFolderWithCheckpoints) {
  TempDir tmp("ggtrain_refuse");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 10);
  test_support::run_quiet(tmp / "r", c, false);
  EXPECT_THROW(test_support::run_quiet(tmp / "r", c, false), Error);
}

using test_support::any_contains;
using test_support::failures_of;

// Negative control of expect_exact_resume: a "stop" at the last step is no
// interruption, and the check says so instead of comparing two whole runs.
TEST(Run, ExactResumeCheckRefusesARunThatWasNotInterrupted) {
  TempDir tmp("ggtrain_resume_control");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 10);
  const auto failed = failures_of([&] { test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 10); });
  EXPECT_TRUE(any_contains(failed, "already holds the final checkpoint")) << failed.size() << " failures";
}

// Negative control of the data-position and metrics comparisons: two runs
// that drew other batches (another seed) are told apart by both.
TEST(Run, DataPositionAndMetricsChecksTellOtherBatchesApart) {
  TempDir tmp("ggtrain_position_control");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 10);
  test_support::run_quiet(tmp / "a", c, false);
  c.train.seed = 7;
  test_support::run_quiet(tmp / "b", c, false);
  const auto position = failures_of([&] {
    test_support::expect_same_data_position(train::state_path(tmp / "a", 10), train::state_path(tmp / "b", 10));
  });
  EXPECT_TRUE(any_contains(position, "train.seed")) << position.size() << " failures";
  const auto metrics = failures_of([&] { test_support::expect_same_metrics(tmp / "a", tmp / "b"); });
  EXPECT_TRUE(any_contains(metrics, "metrics.jsonl line 1")) << metrics.size() << " failures";
}
