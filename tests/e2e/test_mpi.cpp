// Data-parallel training under `mpirun -np N --oversubscribe`,
// checked against the single-process trainer as the truth: the same global
// batch must give the same losses (up to reduction order), a resumed N-rank
// run must be bit-identical to an uninterrupted one, and a failure on any
// rank must end every rank with one message.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "gguf/reader.h"
#include "quant/gguf_floats.h"
#include "support/capture.h"
#include "support/cli_runner.h"
#include "support/compare.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "support/skip.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using namespace ggtrain::test_support;

namespace {

constexpr int kSteps = 50;
// 2 ranks vs 1 process after kSteps steps, per tensor, max|diff| / max|ref|:
// measured 6.6e-6 for the weights and 2.2e-6 for the moments, replicated
// and ZeRO-1 alike (TwoRanksFollowTheSingleProcessRun prints them).
constexpr double kWeightLimit = 5e-5, kMomentLimit = 5e-5;

// Open MPI refuses root unless told; oversubscribe: 2 ranks on any machine.
const std::vector<std::pair<std::string, std::string>> kMpiEnv{{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                               {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                                                               {"OMPI_MCA_rmaps_base_oversubscribe", "1"}};

std::vector<std::string> under_mpirun(int ranks, std::vector<std::string> args) {
  std::vector<std::string> a{GGTRAIN_MPIRUN, "-q", "-np", std::to_string(ranks), "--oversubscribe"};
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

std::vector<std::string> sets(int zero, const std::vector<std::string>& more = {}) {
  std::vector<std::string> s{"train.steps=" + std::to_string(kSteps), "train.zero=" + std::to_string(zero),
                             "checkpoint.every=10"};
  s.insert(s.end(), more.begin(), more.end());
  return s;
}

pid_t spawn_mpirun(const std::vector<std::string>& args, const std::string& out, CliOptions opts) {
  opts.env.insert(opts.env.end(), kMpiEnv.begin(), kMpiEnv.end());
  return spawn_cli(args, out, opts);
}

// Waits at most `limit` for a spawned mpirun: a hang is a failure, not a stuck test.
CliResult wait_within(pid_t pid, const std::string& out, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGTERM);  // mpirun ends its ranks
      std::this_thread::sleep_for(std::chrono::seconds(5));
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "still running after " << limit.count() << " s: hung";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ifstream in(out, std::ios::binary);
  CliResult r;
  r.status = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
  r.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

CliResult run_within(const std::vector<std::string>& args, const std::string& out, CliOptions opts,
                     std::chrono::seconds limit = std::chrono::seconds(180)) {
  return wait_within(spawn_mpirun(args, out, std::move(opts)), out, limit);
}

CliResult run_ok(const std::vector<std::string>& args, const std::string& out) {
  CliResult r = run_within(args, out, {});
  EXPECT_EQ(r.status, 0) << r.output;
  return r;
}

// The arguments without --quiet: the run then prints its data-parallel line.
std::vector<std::string> loud(std::vector<std::string> args) {
  args.erase(std::remove(args.begin(), args.end(), "--quiet"), args.end());
  return args;
}

// "data parallel: ...; ZeRO-1 (train.zero = 1): AdamW state 0.5 MiB per
// rank (whole: 1.0 MiB), N gradient buckets", read back.
struct OptimizerLine {
  std::string mode;
  double per_rank_mib = -1, whole_mib = -1;
};
OptimizerLine optimizer_line(const std::string& output) {
  static const std::regex re(R"(; ([^;]+): AdamW state ([0-9.]+) MiB per rank \(whole: ([0-9.]+) MiB\))");
  std::smatch m;
  OptimizerLine l;
  if (!std::regex_search(output, m, re)) {
    ADD_FAILURE() << "no data-parallel line in:\n" << output;
    return l;
  }
  l.mode = m[1];
  l.per_rank_mib = std::stod(m[2]);
  l.whole_mib = std::stod(m[3]);
  return l;
}

struct Losses {
  std::map<int64_t, double> train, val;
  size_t step_records = 0;
};

Losses read_losses(const std::string& run_dir) {
  Losses l;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      l.train[j["step"].get<int64_t>()] = j["loss"].get<double>();
      ++l.step_records;
    }
    if (j.contains("val_loss")) l.val[j["step"].get<int64_t>()] = j["val_loss"].get<double>();
  }
  return l;
}

void expect_close(const std::map<int64_t, double>& want, const std::map<int64_t, double>& got, double rel,
                  const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [step, w] : want) {
    ASSERT_TRUE(got.count(step)) << what << ": no step " << step;
    EXPECT_LE(std::fabs(got.at(step) - w), rel * std::fabs(w))
        << what << " at step " << step << ": " << got.at(step) << " vs " << w;
  }
}

// Every tensor of `got` (final weights, or the state file's AdamW moments)
// against the same tensor of `want`, max |got - want| / max |want| per
// tensor. Prints the worst ratio, so the stated limit can be checked
// against what is measured.
void expect_same_tensors(const std::string& want, const std::string& got, double limit, const std::string& what) {
  gguf::GgufFile a(want), b(got);
  ASSERT_EQ(a.tensors().size(), b.tensors().size()) << what;
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const auto& ta = a.tensors()[i];
    const auto& tb = b.tensors()[i];
    ASSERT_EQ(ta.name, tb.name) << what;
    const auto c = test_support::compare(quant::tensor_floats(b, tb), quant::tensor_floats(a, ta));
    EXPECT_TRUE(test_support::within_rel_to_max(c, limit)) << what << ": " << ta.name;
    if (!(c.rel_to_max() <= worst)) worst = c.rel_to_max(), worst_name = ta.name;
  }
  std::printf("%s: worst max|diff|/max|ref| %.3g (%s)\n", what.c_str(), worst, worst_name.c_str());
}

int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) ++n;
  return n;
}

class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override { write_synthetic_corpus(corpus_, 3000); }
  std::string dir(const std::string& name) const { return tmp_ / name; }
  std::vector<std::string> train(const std::string& name, const std::vector<std::string>& s) const {
    return tiny_train_args(GGTRAIN_BIN, dir(name), corpus_, s);
  }
  std::string out(const std::string& name) const { return tmp_ / (name + ".out"); }
  void hybrid_with_zero1_follows_one_process(const std::string& arch, std::vector<std::string> model_sets);
  // args(name, train.zero) run as one process ("one"), under 2 ranks ("dp")
  // and 2 ranks with ZeRO-1 ("zero"): `steps` step losses and `evals`
  // validations, each within 1e-5 of one process's, and the final weights
  // within weight_limit.
  void expect_two_ranks_follow_one_process(const std::function<std::vector<std::string>(const std::string&, int)>& args,
                                           int64_t steps, size_t evals, double weight_limit, const std::string& what,
                                           double loss_limit = 1e-5) {
    run_ok(args("one", 0), out("one"));
    run_ok(under_mpirun(2, args("dp", 0)), out("dp"));
    run_ok(under_mpirun(2, args("zero", 1)), out("zero"));
    const Losses one = read_losses(dir("one")), dp = read_losses(dir("dp")), zero = read_losses(dir("zero"));
    ASSERT_EQ(one.train.size(), size_t(steps));
    ASSERT_EQ(one.val.size(), evals);
    expect_close(one.train, dp.train, loss_limit, what + ", 2 ranks vs 1 process");
    expect_close(one.train, zero.train, loss_limit, what + ", 2 ranks ZeRO-1 vs 1 process");
    expect_close(one.val, dp.val, loss_limit, what + " validation, 2 ranks");
    for (const char* run : {"dp", "zero"})
      expect_same_tensors(train::weights_path(dir("one"), steps), train::weights_path(dir(run), steps), weight_limit,
                          what + " " + run + " weights");
  }

  TempDir tmp_;
  std::string corpus_ = tmp_ / "corpus.txt";
};

// The acceptance test of the issue: 2 ranks (replicated and ZeRO-1) follow
// the single-process run at the same global batch within 1e-5 relative,
// every one of 50 steps; the residual is reduction order (data_parallel.h).
TEST_F(MpiTest, TwoRanksFollowTheSingleProcessRun) {
  run_ok(train("one", sets(0)), out("one"));
  const CliResult dp_run = run_ok(under_mpirun(2, loud(train("dp", sets(0)))), out("dp"));
  const CliResult zero_run = run_ok(under_mpirun(2, loud(train("zero", sets(1)))), out("zero"));
  // ZeRO-1 is on, by the run's own word and by what each rank holds: half
  // of AdamW's state (the line reports the buffers the rank kept), where the
  // replicated run holds all of it. Every test here that passes with ZeRO-1
  // would also pass with it silently off.
  const OptimizerLine dp_line = optimizer_line(dp_run.output), zero_line = optimizer_line(zero_run.output);
  EXPECT_EQ(dp_line.mode, "replicated optimizer (train.zero = 0)");
  EXPECT_EQ(zero_line.mode, "ZeRO-1 (train.zero = 1)");
  EXPECT_EQ(dp_line.per_rank_mib, dp_line.whole_mib);
  EXPECT_GT(zero_line.whole_mib, 0.0);
  EXPECT_NEAR(zero_line.per_rank_mib, zero_line.whole_mib / 2, 0.1) << zero_run.output;
  const Losses one = read_losses(dir("one")), dp = read_losses(dir("dp")), zero = read_losses(dir("zero"));
  ASSERT_EQ(one.train.size(), size_t(kSteps));
  expect_close(one.train, dp.train, 1e-5, "2 ranks vs 1 process");
  expect_close(one.train, zero.train, 1e-5, "2 ranks ZeRO-1 vs 1 process");
  expect_close(one.val, dp.val, 1e-5, "validation, 2 ranks");
  expect_close(one.val, zero.val, 1e-5, "validation, 2 ranks ZeRO-1");
  // Rank 0 alone writes: one record per step, and the checkpoints.
  EXPECT_EQ(dp.step_records, size_t(kSteps));
  EXPECT_EQ(zero.step_records, size_t(kSteps));
  EXPECT_EQ(train::latest_step(dir("zero")), kSteps);
  // Not just the losses: the final weights and AdamW moments follow the
  // single process too (the residual is the order of the gradient sums,
  // amplified by AdamW's division by sqrt(v) for elements with tiny v).
  for (const char* run : {"dp", "zero"}) {
    expect_same_tensors(train::weights_path(dir("one"), kSteps), train::weights_path(dir(run), kSteps), kWeightLimit,
                        std::string(run) + " weights");
    expect_same_tensors(train::state_path(dir("one"), kSteps), train::state_path(dir(run), kSteps), kMomentLimit,
                        std::string(run) + " AdamW moments");
  }
}

// Instruction tuning under MPI: the loss is the mean over the answer tokens
// of the whole global batch (each rank weighs its micro-batches by their
// counted targets over the global count), so 2 ranks follow 1 process.
TEST_F(MpiTest, ChatFinetuneTwoRanksFollowOneProcess) {
  run_ok(train("base", {"train.steps=10", "model.ctx=256"}), out("base"));
  {
    std::ofstream chat(tmp_ / "chat.jsonl");
    for (int i = 0; i < 300; ++i)
      chat << "{\"messages\": [{\"role\": \"user\", \"content\": \"Say word " << i % 7
           << "\"}, {\"role\": \"assistant\", \"content\": \"" << std::string(size_t(1 + i % 5), 'a' + char(i % 7))
           << "\"}]}\n";
  }
  auto chat_run = [&](const std::string& name, int zero) {
    return tiny_train_args(
        GGTRAIN_BIN, dir(name), tmp_ / "chat.jsonl",
        {"init.from=" + train::weights_path(dir("base"), 10), "data.format=chat", "train.seq_len=96", "train.batch=4",
         "train.steps=20", "train.eval_every=10", "data.val_fraction=0.1", "train.zero=" + std::to_string(zero)});
  };
  run_ok(chat_run("one", 0), out("one"));
  run_ok(under_mpirun(2, chat_run("dp", 0)), out("dp"));
  run_ok(under_mpirun(2, chat_run("zero", 1)), out("zero"));
  const Losses one = read_losses(dir("one")), dp = read_losses(dir("dp")), zero = read_losses(dir("zero"));
  ASSERT_EQ(one.train.size(), 20u);
  ASSERT_EQ(one.val.size(), 2u);
  expect_close(one.train, dp.train, 1e-5, "chat, 2 ranks vs 1 process");
  expect_close(one.train, zero.train, 1e-5, "chat, 2 ranks ZeRO-1 vs 1 process");
  expect_close(one.val, dp.val, 1e-5, "chat validation, 2 ranks");
  for (const char* run : {"dp", "zero"}) {
    expect_same_tensors(train::weights_path(dir("one"), 20), train::weights_path(dir(run), 20), kWeightLimit,
                        std::string("chat ") + run + " weights");
    expect_same_tensors(train::state_path(dir("one"), 20), train::state_path(dir(run), 20), kMomentLimit,
                        std::string("chat ") + run + " AdamW moments");
  }
}

// train.eval_tasks under MPI: each rank scores every other task and the
// sums are added up, so the record is the single process's: at step 0 (the
// same starting weights) the same accuracies and gold_logprob up to the
// order of its sum.
TEST_F(MpiTest, TasksSplitOverRanksAddUp) {
  {
    std::ifstream in(corpus_);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l) && lines.size() < 60;) lines.push_back(l);
    std::ofstream tasks(tmp_ / "tasks.jsonl");
    for (size_t i = 0; i < 40; i += 2)
      tasks << nlohmann::json{{"context", lines[i]},
                              {"endings", {lines[i + 1], lines[i + 11], lines[i + 7]}},
                              {"label", i % 3 == 0 ? 0 : 1}}
                   .dump()
            << "\n";
  }
  const std::vector<std::string> s{"train.steps=4", "model.ctx=256", "train.eval_tasks=" + tmp_ / "tasks.jsonl",
                                   "train.eval_tasks_every=4"};
  run_ok(train("one", s), out("one"));
  run_ok(under_mpirun(2, train("dp", s)), out("dp"));
  auto task_records = [](const std::string& run) {
    std::map<int64_t, nlohmann::json> r;
    std::ifstream in(run + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("task")) r[j["step"].get<int64_t>()] = j;
    }
    return r;
  };
  auto one = task_records(dir("one")), dp = task_records(dir("dp"));
  ASSERT_EQ(one.size(), 2u);  // steps 0 and 4
  ASSERT_EQ(dp.size(), 2u);
  EXPECT_EQ(dp[0]["tasks"], 20);
  EXPECT_EQ(dp[0]["acc"], one[0]["acc"]);
  EXPECT_EQ(dp[0]["acc_norm"], one[0]["acc_norm"]);
  EXPECT_NEAR(dp[0]["gold_logprob"].get<double>(), one[0]["gold_logprob"].get<double>(),
              1e-12 * std::abs(one[0]["gold_logprob"].get<double>()));
  EXPECT_NE(dp[0]["gold_logprob"].get<double>(), 0.0);
}

// Preference tuning under MPI: the loss is the mean over the pairs of the
// whole global batch, so 2 ranks (replicated and ZeRO-1) follow 1 process.
// DPO also has its reference, computed by rank 0 before the others start and
// read by them; ORPO and SimPO have none, and ORPO adds the chosen answers'
// NLL over the step's chosen tokens, counted across the ranks.
class MpiPreference : public MpiTest, public ::testing::WithParamInterface<const char*> {};

// 2 ranks vs 1 process after 10 preference steps, per tensor, max|diff| /
// max|ref| as expect_same_tensors prints it: measured DPO 6.7e-6, ORPO
// 4.7e-6, SimPO 2.0e-5 (ASan build: 6.8e-5; a few elements whose AdamW
// update turns on gradients near zero). 3x margin over the ASan value; a
// run with a 1% higher learning rate differs by 0.064
// (TensorComparisonTellsANearbyRunApart).
constexpr double kPreferenceWeightLimit = 2e-4;

TEST_P(MpiPreference, TwoRanksFollowOneProcess) {
  const std::string objective = GetParam();
  run_ok(train("base", {"train.steps=10", "model.ctx=256"}), out("base"));
  {
    std::ofstream pairs(tmp_ / "pairs.jsonl");
    for (int i = 0; i < 200; ++i)
      pairs << "{\"prompt\": \"Say word " << i % 7 << "\", \"chosen\": \""
            << std::string(size_t(1 + i % 5), 'a' + char(i % 7)) << "\", \"rejected\": \""
            << std::string(size_t(1 + i % 3), 'a' + char((i + 1) % 7)) << "\"}\n";
  }
  auto preference_run = [&](const std::string& name, int zero) {
    return tiny_train_args(
        GGTRAIN_BIN, dir(name), tmp_ / "pairs.jsonl",
        {"init.from=" + train::weights_path(dir("base"), 10), "data.format=preference", "train.objective=" + objective,
         "train.beta=0.3", "train.seq_len=96", "train.batch=4", "train.steps=10", "train.eval_every=5",
         "data.val_fraction=0.1", "train.zero=" + std::to_string(zero)});
  };
  expect_two_ranks_follow_one_process(preference_run, 10, 2, kPreferenceWeightLimit, objective);
}

INSTANTIATE_TEST_SUITE_P(Objectives, MpiPreference, ::testing::Values("dpo", "orpo", "simpo"),
                         [](const auto& info) { return std::string(info.param); });

// A bf16 LoRA run under MPI (its float base held in bf16, the adapters'
// x A^T on bf16): 2 ranks, replicated and ZeRO-1, follow one process.
// Looser than fp32's limits: a rank's GEMMs on half the rows accumulate in
// another order, and a float difference of 1e-7 that crosses a bf16
// rounding boundary moves that activation by a bf16 step (4e-3 relative).
// Measured: losses 1.7e-5 relative (step 8), adapters 5.6e-4 of the largest
// element; limits 5e-5 and 2e-3. A 1% higher learning rate moves the
// weights by 0.064 (TensorComparisonTellsANearbyRunApart).
TEST_F(MpiTest, Bf16LoraTwoRanksFollowOneProcess) {
  run_ok(train("base", {"train.steps=10", "model.ctx=256"}), out("base"));
  auto lora_run = [&](const std::string& name, int zero) {
    return train(name,
                 {"init.from=" + train::weights_path(dir("base"), 10), "train.lora.rank=4", "train.precision=bf16",
                  "train.steps=10", "train.eval_every=5", "checkpoint.every=10", "train.zero=" + std::to_string(zero)});
  };
  expect_two_ranks_follow_one_process(lora_run, 10, 2, 2e-3, "bf16 LoRA", 5e-5);
}

// Distillation under MPI: each rank scores its half of the windows with
// the teacher and rank 0 joins the halves, so the teacher's file is byte
// for byte the one a single process writes (each window is scored alone);
// the loss is the mean over the global batch's targets, so 2 ranks
// (replicated and ZeRO-1) follow one process. Weights within
// kPreferenceWeightLimit (measured 7.5e-6 for both, replicated and ZeRO-1).
TEST_F(MpiTest, DistillationTwoRanksFollowOneProcess) {
  run_ok(train("teacher", {"train.steps=20"}), out("teacher"));
  run_ok(train("base", {"train.steps=5", "data.tokenizer=" + dir("teacher") + "/tokenizer.model"}), out("base"));
  auto distill_run = [&](const std::string& name, int zero) {
    return tiny_train_args(GGTRAIN_BIN, dir(name), tmp_ / "corpus.txt",
                           {"init.from=" + train::weights_path(dir("base"), 5), "train.objective=distill",
                            "train.teacher=" + train::weights_path(dir("teacher"), 20), "train.distill.top_k=16",
                            "train.distill.temperature=1.5", "train.distill.alpha=0.2", "train.batch=4",
                            "train.steps=10", "train.eval_every=5", "train.zero=" + std::to_string(zero)});
  };
  expect_two_ranks_follow_one_process(distill_run, 10, 2, kPreferenceWeightLimit, "distill");
  for (const char* stream : {"train", "val"}) {
    const std::string file = std::string("/data/teacher-") + stream + ".bin";
    const std::string one = test_support::slurp(dir("one") + file);
    EXPECT_GT(one.size(), 1000u) << stream;
    for (const char* run : {"dp", "zero"}) {
      EXPECT_TRUE(test_support::slurp(dir(run) + file) == one) << run << " " << stream;
      EXPECT_FALSE(std::filesystem::exists(dir(run) + file + ".part1of2")) << run << " " << stream;
    }
  }
}

// GRPO under MPI: each rank samples the replies to its windows' prompts,
// seeded by step and prompt as one process seeds them, and the loss is
// divided by the reply tokens of every rank, so 2 ranks (replicated and
// ZeRO-1) follow one process: the same rewards, losses within 1e-5 and
// weights within kPreferenceWeightLimit (measured 9.0e-6, both). Each
// batch of replies trains two steps (train.grpo.iterations = 2), each
// rank keeping its own batch beside the checkpoints.
TEST_F(MpiTest, GrpoTwoRanksFollowOneProcess) {
  run_ok(train("base", {"train.steps=10", "model.ctx=128"}), out("base"));
  {
    std::ofstream prompts(tmp_ / "prompts.jsonl");
    for (int i = 0; i < 200; ++i)
      prompts << "{\"prompt\": \"Which word is number " << i % 8 << "?\", \"answer\": \"w" << i % 4 << "\"}\n";
  }
  auto grpo_run = [&](const std::string& name, int zero) {
    return tiny_train_args(
        GGTRAIN_BIN, dir(name), tmp_ / "prompts.jsonl",
        {"init.from=" + train::weights_path(dir("base"), 10), "data.format=auto", "train.objective=grpo",
         "train.grpo.reward=regex:ight", "train.grpo.group=4", "train.grpo.max_tokens=8", "train.grpo.iterations=2",
         "train.seq_len=64", "train.batch=4", "train.steps=4", "train.eval_every=2", "data.val_fraction=0.05",
         "train.zero=" + std::to_string(zero)});
  };
  expect_two_ranks_follow_one_process(grpo_run, 4, 2, kPreferenceWeightLimit, "grpo");
  for (int64_t step = 1; step <= 4; ++step)
    for (const char* run : {"dp", "zero"})
      EXPECT_EQ(test_support::step_record(dir("one"), step)["reward"],
                test_support::step_record(dir(run), step)["reward"])
          << run << " step " << step;
  for (const char* run : {"dp", "zero"})
    for (const char* rank : {"rank0of2", "rank1of2"})
      EXPECT_TRUE(std::filesystem::exists(dir(run) + "/grpo/replies-step3-" + rank + ".json")) << run << " " << rank;
}

// Negative control of the tensor comparison above: a single-process run
// whose learning rate is 1% higher is told apart from the first one.
TEST_F(MpiTest, TensorComparisonTellsANearbyRunApart) {
  run_ok(train("one", sets(0)), out("one"));
  run_ok(train("other", sets(0, {"train.lr_max=0.00303"})), out("other"));
  const auto failed = test_support::failures_of([&] {
    expect_same_tensors(train::weights_path(dir("one"), kSteps), train::weights_path(dir("other"), kSteps),
                        kWeightLimit, "weights, lr_max 1% higher");
  });
  EXPECT_TRUE(test_support::any_contains(failed, "lr_max 1% higher")) << failed.size() << " failures";
}

class MpiResume : public MpiTest, public ::testing::WithParamInterface<int> {};

// Stop at step 20 and resume, both with 2 ranks: every tensor of the final
// weights and optimizer state (gathered whole from the ZeRO-1 shards) and
// every loss equal to the uninterrupted 2-rank run, bit for bit.
TEST_P(MpiResume, SameRankCountIsBitExact) {
  const int zero = GetParam();
  run_ok(under_mpirun(2, train("whole", sets(zero))), out("whole"));
  auto first = train("split", sets(zero));
  first.insert(first.end(), {"--stop-at", "20"});
  run_ok(under_mpirun(2, first), out("split1"));
  EXPECT_EQ(train::latest_step(dir("split")), 20);
  run_ok(under_mpirun(2, resume_args(GGTRAIN_BIN, dir("split"))), out("split2"));
  for (const char* kind : {"weights", "state"}) {
    std::string why;
    EXPECT_TRUE(same_tensor_data(dir("whole") + "/" + kind + "/step_50.gguf",
                                 dir("split") + "/" + kind + "/step_50.gguf", &why))
        << kind << ": " << why;
  }
  const Losses a = read_losses(dir("whole")), b = read_losses(dir("split"));
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.val, b.val);
}

INSTANTIATE_TEST_SUITE_P(Zero, MpiResume, ::testing::Values(0, 1),
                         [](const auto& info) { return "zero" + std::to_string(info.param); });

// Checkpoints hold the whole optimizer state, so a run resumes with another
// number of ranks (the global batch stays train.batch x grad_accum) and
// continues the same trajectory up to rounding; the truth is one process.
TEST_F(MpiTest, ResumesWithAnotherRankCount) {
  run_ok(train("one", sets(0)), out("one"));
  auto stop = [](std::vector<std::string> a) {
    a.insert(a.end(), {"--stop-at", "20"});
    return a;
  };
  run_ok(under_mpirun(2, stop(train("two_then_one", sets(1)))), out("a1"));
  run_ok(resume_args(GGTRAIN_BIN, dir("two_then_one")), out("a2"));
  run_ok(stop(train("one_then_two", sets(0))), out("b1"));
  run_ok(under_mpirun(2, resume_args(GGTRAIN_BIN, dir("one_then_two"), {"train.zero=1"})), out("b2"));
  const Losses one = read_losses(dir("one"));
  expect_close(one.train, read_losses(dir("two_then_one")).train, 1e-5, "2 ranks, then 1");
  expect_close(one.train, read_losses(dir("one_then_two")).train, 1e-5, "1 rank, then 2 with ZeRO-1");
  for (const char* run : {"two_then_one", "one_then_two"}) {
    expect_same_tensors(train::weights_path(dir("one"), kSteps), train::weights_path(dir(run), kSteps), kWeightLimit,
                        std::string(run) + " weights");
    expect_same_tensors(train::state_path(dir("one"), kSteps), train::state_path(dir(run), kSteps), kMomentLimit,
                        std::string(run) + " AdamW moments");
  }
}

// With frozen tensors the trainable tensors are packed anew (their gradients
// and moments have their own layout): ZeRO-1 then all-gathers the updated
// weights through that layout and copies them to the parameters' places.
TEST_F(MpiTest, FrozenTensorsWithZero1FollowOneProcess) {
  const std::vector<std::string> s = sets(0, {"train.steps=30", "train.freeze=blk.0,token_embd"});
  auto zero = s;
  zero.push_back("train.zero=1");
  run_ok(train("one", s), out("one"));
  run_ok(under_mpirun(2, train("zero", zero)), out("zero"));
  expect_close(read_losses(dir("one")).train, read_losses(dir("zero")).train, 1e-5, "frozen, ZeRO-1");
  expect_same_tensors(train::weights_path(dir("one"), 30), train::weights_path(dir("zero"), 30), kWeightLimit,
                      "frozen, ZeRO-1 weights");
  expect_same_tensors(train::state_path(dir("one"), 30), train::state_path(dir("zero"), 30), kMomentLimit,
                      "frozen, ZeRO-1 AdamW moments");
}

// A hybrid model (lfm2: a short-convolution layer, its kernel a 2-D tensor
// of 3 taps, beside an attention layer; qwen35: a Gated DeltaNet layer
// beside a gated attention layer): two ranks with ZeRO-1 follow one
// process: the losses within 1e-5 as llama's; the weights within 1e-3 of
// each tensor's largest, not kWeightLimit: AdamW's
// first steps move a weight whose gradient nearly cancels by up to lr_max
// whatever its size, so the split batch's rounding shows there (measured
// lfm2 blk.0.ffn_down: 1.9e-4 after 2 steps, 1.7e-4 after 10, 1.0e-4 after 50;
// the logits after 50 steps 2.1e-5 of the largest, llama's 9.5e-6). The
// control: the same run with lr_max 1% higher differs by more than 1e-3.
void MpiTest::hybrid_with_zero1_follows_one_process(const std::string& arch, std::vector<std::string> model_sets) {
  model_sets.insert(model_sets.begin(), "model.arch=" + arch);
  const std::vector<std::string> s = sets(0, model_sets);
  auto zero = s, nearby = s;
  zero.push_back("train.zero=1");
  nearby.push_back("train.lr_max=0.00303");
  run_ok(train("one", s), out("one"));
  run_ok(under_mpirun(2, train("zero", zero)), out("zero"));
  run_ok(train("nearby", nearby), out("nearby"));
  expect_close(read_losses(dir("one")).train, read_losses(dir("zero")).train, 1e-5, arch + ", ZeRO-1");
  constexpr double kHybridWeightLimit = 1e-3;
  expect_same_tensors(train::weights_path(dir("one"), kSteps), train::weights_path(dir("zero"), kSteps),
                      kHybridWeightLimit, arch + ", ZeRO-1 weights");
  const auto failed = test_support::failures_of([&] {
    expect_same_tensors(train::weights_path(dir("one"), kSteps), train::weights_path(dir("nearby"), kSteps),
                        kHybridWeightLimit, arch + " weights, lr_max 1% higher");
  });
  EXPECT_TRUE(test_support::any_contains(failed, "lr_max 1% higher")) << failed.size() << " failures";
}
TEST_F(MpiTest, Lfm2WithZero1FollowsOneProcess) {
  hybrid_with_zero1_follows_one_process("lfm2", {"model.attention_layers=1"});
}
// Mixture of experts: every rank routes its own tokens, grouped by expert.
// The load-balancing loss is off here: each rank balances its own share of
// the batch (as Hugging Face's under DDP), which one process over the whole
// batch does not reproduce.
TEST_F(MpiTest, Qwen3MoeWithZero1FollowsOneProcess) {
  hybrid_with_zero1_follows_one_process("qwen3moe", {"model.n_experts=4", "model.n_experts_used=2",
                                                     "model.d_ff_expert=48", "train.router_aux_loss_coef=0"});
}
TEST_F(MpiTest, Qwen35WithZero1FollowsOneProcess) {
  hybrid_with_zero1_follows_one_process(
      "qwen35", {"model.attention_layers=1", "model.rope_dim=8", "model.ssm_state_size=16", "model.ssm_group_count=2",
                 "model.ssm_time_step_rank=4"});
}

// A rank count that does not divide train.batch is refused up front, with
// the reason, by one rank.
// SIGTERM to mpirun (what a batch scheduler sends at the time limit): Open
// MPI forwards it to the ranks, they agree on the step to stop after, rank 0
// writes the checkpoint and says how to resume; resuming under mpirun gives
// the uninterrupted run's tensors bit for bit. (mpirun itself exits 1 after
// forwarding a signal, whatever the ranks return.)
TEST_F(MpiTest, SigtermToMpirunCheckpointsAndResumesBitExact) {
  constexpr int64_t kLong = 1500;  // ~3 s, ~30 s under ASan: the signal comes after 50
  const std::vector<std::string> s =
      sets(1, {"train.steps=" + std::to_string(kLong), "checkpoint.every=0", "train.eval_every=0"});
  run_ok(under_mpirun(2, train("whole", s)), out("whole"));
  const pid_t pid = spawn_mpirun(under_mpirun(2, train("cut", s)), out("cut"), {});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto logged_steps = [&] {  // lines only: the last one may be half written
    std::ifstream in(dir("cut") + "/metrics.jsonl");
    int64_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find("\"loss\"") != std::string::npos;
    return n;
  };
  while (logged_steps() < 50 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(pid, SIGTERM);
  const CliResult r = wait_within(pid, out("cut"), std::chrono::seconds(60));
  const int64_t stopped = train::latest_step(dir("cut"));
  ASSERT_GT(stopped, 0) << r.output;
  ASSERT_LT(stopped, kLong) << "the run ended before the signal arrived";
  EXPECT_EQ(count_of(r.output, "SIGTERM received: stopped after step " + std::to_string(stopped)), 1) << r.output;
  EXPECT_NE(r.output.find("resume with: ggtrain train --resume"), std::string::npos) << r.output;
  run_ok(under_mpirun(2, resume_args(GGTRAIN_BIN, dir("cut"))), out("cut2"));
  ASSERT_EQ(train::latest_step(dir("cut")), kLong);
  std::string why;
  EXPECT_TRUE(same_tensor_data(train::weights_path(dir("whole"), kLong), train::weights_path(dir("cut"), kLong), &why))
      << why;
  EXPECT_TRUE(same_tensor_data(train::state_path(dir("whole"), kLong), train::state_path(dir("cut"), kLong), &why))
      << why;
}

TEST_F(MpiTest, RankCountMustDivideTheBatch) {
  const CliResult r = run_within(under_mpirun(3, train("three", sets(0))), out("three"), {});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.output, "ggtrain: error:"), 1) << r.output;
  EXPECT_NE(error_line(r.output).find("train.batch = 4 cannot be split over 3 ranks"), std::string::npos) << r.output;
}

// One rank fails alone (injected after its backward, as an I/O error would)
// while rank 0 waits for it in the gradient reduction: every rank ends,
// non-zero, within the time limit, with that rank's one message.
TEST_F(MpiTest, FailureOnOneRankEndsEveryRank) {
  CliOptions o;
  o.env = {{"GGTRAIN_INJECT_RANK_FAILURE", "1:5"}};
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_within(under_mpirun(2, train("fail", sets(1))), out("fail"), o, std::chrono::seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.output, "ggtrain: error:"), 1) << r.output;
  EXPECT_EQ(error_line(r.output), "rank 1 of 2: step 5: injected failure on rank 1 (GGTRAIN_INJECT_RANK_FAILURE)")
      << r.output;
}

// A failure every rank sees at once (the NaN policy: loss and gradient norm
// are global) is reported once, not once per rank.
TEST_F(MpiTest, NonFiniteLossStopsEveryRankWithOneMessage) {
  CliOptions o;
  o.env = {{"GGTRAIN_INJECT_NAN_AT_STEP", "5"}, {"GGTRAIN_INJECT_NAN_INTO", "grad"}};
  const CliResult r = run_within(under_mpirun(2, train("nan", sets(1))), out("nan"), o, std::chrono::seconds(60));
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.output, "ggtrain: error:"), 1) << r.output;
  EXPECT_NE(error_line(r.output).find("step 5: loss"), std::string::npos) << r.output;
  EXPECT_NE(error_line(r.output).find("is not finite"), std::string::npos) << r.output;
}

// Bad input found while rank 0 prepares the run, and a checkpoint rank 0
// cannot write (RUN/weights is a file, so its folder cannot be made; a
// file-size limit would break Open MPI's own shared-memory files first):
// one message, every rank gone.
TEST_F(MpiTest, BadInputAndWriteFailureEndEveryRank) {
  auto missing = train("missing", sets(0));
  for (auto& a : missing)
    if (a.rfind("data.corpus=", 0) == 0) a = "data.corpus=" + dir("no-such-corpus.txt");
  CliResult r = run_within(under_mpirun(2, missing), out("missing"), {}, std::chrono::seconds(60));
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.output, "ggtrain: error:"), 1) << r.output;
  EXPECT_NE(error_line(r.output).find("matches no file"), std::string::npos) << r.output;

  std::filesystem::create_directories(dir("blocked"));
  std::ofstream(dir("blocked") + "/weights") << "not a folder";
  r = run_within(under_mpirun(2, train("blocked", sets(1))), out("blocked"), {}, std::chrono::seconds(60));
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.output, "ggtrain: error:"), 1) << r.output;
  EXPECT_NE(error_line(r.output).find("step 10: cannot write the checkpoint"), std::string::npos) << r.output;
}

// Two "hosts": network namespaces A and B joined by a veth pair
// (10.77.0.1 <-> 10.77.0.2). mpirun runs in A; its launcher agent (what
// would be ssh between machines) starts Open MPI's daemon in B through
// `ip netns exec`, and the ranks may only talk TCP over the veth (btl
// tcp,self). The result must equal the one-host 2-rank run bit for bit.
class Namespaces {
 public:
  explicit Namespaces(const std::string& log) {
    const std::string tag = std::to_string(::getpid() % 100000);
    a_ = "ggtA" + tag;
    b_ = "ggtB" + tag;
    const std::string va = "ggtva" + tag, vb = "ggtvb" + tag;
    ok_ = sh("ip netns add " + a_ + " && ip netns add " + b_ + " && ip link add " + va + " type veth peer name " + vb +
                 " && ip link set " + va + " netns " + a_ + " && ip link set " + vb + " netns " + b_ + " && ip -n " +
                 a_ + " addr add 10.77.0.1/24 dev " + va + " && ip -n " + b_ + " addr add 10.77.0.2/24 dev " + vb +
                 " && ip -n " + a_ + " link set " + va + " up && ip -n " + b_ + " link set " + vb + " up && ip -n " +
                 a_ + " link set lo up && ip -n " + b_ + " link set lo up",
             log);
  }
  ~Namespaces() { sh("ip netns del " + a_ + "; ip netns del " + b_, "/dev/null"); }  // the veth goes with them
  bool ok() const { return ok_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  static bool sh(const std::string& cmd, const std::string& log) {
    return std::system(("(" + cmd + ") >" + log + " 2>&1").c_str()) == 0;
  }

 private:
  std::string a_, b_;
  bool ok_ = false;
};

// /proc/PID/ns/net of a process in namespace `name` ("net:[INODE]"): `ip
// netns add` bind-mounts the namespace at /run/netns/NAME.
std::string netns_link(const std::string& name) {
  struct stat st {};
  if (::stat(("/run/netns/" + name).c_str(), &st) != 0) return "?";
  return "net:[" + std::to_string(st.st_ino) + "]";
}

// Network namespaces of the running ggtrain processes (by /proc/PID/ns/net).
std::set<std::string> ggtrain_netns() {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    // "ggtrain", or the level program a portable build's launcher execs ("ggtrain-v4").
    if (!std::getline(comm, name) || (name != "ggtrain" && name.rfind("ggtrain-v", 0) != 0)) continue;
    std::error_code ec2;
    const auto ns = std::filesystem::read_symlink(e.path() / "ns/net", ec2);
    if (!ec2) out.insert(ns.string());
  }
  return out;
}

TEST_F(MpiTest, TwoHostsInNetworkNamespaces) {
  if (::geteuid() != 0) GGTRAIN_SKIP("needs root to create network namespaces (ip netns add)");
  Namespaces net(dir("netns.log"));
  if (!net.ok()) {
    std::ifstream in(dir("netns.log"));
    std::string why((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    GGTRAIN_SKIP("cannot create network namespaces and a veth pair here (" + why + ")");
  }
  const std::string agent = dir("agent.sh");
  {
    std::ofstream f(agent);
    f << "#!/bin/sh\n"
         "# Open MPI's launcher agent: $1 is the host, the rest what ssh would run there.\n"
         "host=$1; shift\n"
         "case \"$host\" in 10.77.0.1) ns="
      << net.a() << ";; 10.77.0.2) ns=" << net.b()
      << ";;\n"
         "  *) echo \"agent: unknown host $host\" >&2; exit 1;; esac\n"
         "echo \"$ns\" >> "
      << dir("agent.log")
      << "\n"
         "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n";
  }
  std::filesystem::permissions(agent, std::filesystem::perms::owner_all);
  run_ok(under_mpirun(2, train("one_host", sets(1, {"train.steps=20"}))), out("one_host"));

  std::string cmd = "exec ip netns exec " + net.a() + " " + GGTRAIN_MPIRUN +
                    " -q -np 2 --host 10.77.0.1,10.77.0.2 --mca plm_rsh_agent " + agent +
                    " --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24";
  for (const auto& a : train("two_hosts", sets(1, {"train.steps=20"}))) cmd += " " + a;
  std::atomic<bool> running{true};
  std::set<std::string> seen;
  std::thread watch([&] {
    while (running) {
      for (const auto& ns : ggtrain_netns()) seen.insert(ns);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const CliResult r = run_within({"/bin/sh", "-c", cmd}, out("two_hosts"), {}, std::chrono::seconds(180));
  running = false;
  watch.join();
  ASSERT_EQ(r.status, 0) << r.output;

  std::ifstream log(dir("agent.log"));
  std::string launched((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(launched, net.b() + "\n") << "the agent should start one daemon, in namespace B";
  // (Other ggtrain processes on the machine run in other namespaces.)
  EXPECT_EQ(seen.count(netns_link(net.a())), 1u) << "no rank ran in namespace A";
  EXPECT_EQ(seen.count(netns_link(net.b())), 1u) << "no rank ran in namespace B";

  const Losses one = read_losses(dir("one_host")), two = read_losses(dir("two_hosts"));
  ASSERT_EQ(one.train.size(), 20u);
  EXPECT_EQ(one.train, two.train);
  EXPECT_EQ(one.val, two.val);
  for (const char* kind : {"weights", "state"}) {
    std::string why;
    EXPECT_TRUE(same_tensor_data(dir("one_host") + "/" + kind + "/step_20.gguf",
                                 dir("two_hosts") + "/" + kind + "/step_20.gguf", &why))
        << kind << ": " << why;
  }
}

}  // namespace
