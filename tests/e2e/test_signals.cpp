// Ctrl-C / SIGTERM: `ggtrain train` finishes the step it is in, writes a
// checkpoint, prints how to resume and exits 128 + the signal (130 for
// SIGINT, 143 for SIGTERM, as the shell reports a process the signal
// ended); resuming to the end gives
// the same tensors, bit for bit, as a run that was never interrupted.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "support/cli_runner.h"
#include "support/run_helpers.h"
#include "support/skip.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"

using namespace ggtrain;
using namespace ggtrain::test_support;

namespace {

constexpr int kSteps = 400;

// No periodic checkpoints: every checkpoint but the last comes from a signal.
std::vector<std::string> args(const std::string& dir, const std::string& corpus) {
  return tiny_train_args(GGTRAIN_BIN, dir, corpus,
                         {"train.steps=" + std::to_string(kSteps), "checkpoint.every=0", "train.eval_every=0"});
}

int64_t logged_steps(const std::string& dir) {
  std::ifstream in(dir + "/metrics.jsonl");
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find("\"loss\"") != std::string::npos;
  return n;
}

// Starts the CLI, waits until it has logged `after_steps` more steps than
// `dir` had, sends `sig`, and returns the result.
CliResult interrupt(const std::vector<std::string>& a, const std::string& dir, int64_t after_steps, int sig,
                    const std::string& out) {
  const int64_t before = logged_steps(dir);
  pid_t pid = spawn_cli(a, out);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (logged_steps(dir) < before + after_steps && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(pid, sig);
  return wait_cli(pid, out);
}

}  // namespace

TEST(Signals, SigtermAndSigintCheckpointExitWithTheSignalAndResumeBitIdentical) {
  TempDir tmp("ggtrain_signals");
  const std::string corpus = tmp / "corpus.txt";
  write_synthetic_corpus(corpus, 1200);
  const std::string clean = tmp / "clean", dir = tmp / "interrupted";
  ASSERT_EQ(run_cli(args(clean, corpus), tmp / "clean.out").status, 0);
  ASSERT_EQ(train::latest_step(clean), kSteps);

  // SIGTERM during the first run.
  CliResult r = interrupt(args(dir, corpus), dir, 20, SIGTERM, tmp / "term.out");
  ASSERT_EQ(r.status, 128 + SIGTERM) << r.output;
  const int64_t s1 = train::latest_step(dir);
  ASSERT_GT(s1, 0) << r.output;
  ASSERT_LT(s1, kSteps) << "the run ended before the signal arrived";
  EXPECT_NE(r.output.find("SIGTERM received: stopped after step " + std::to_string(s1)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resume with: ggtrain train --resume --run-dir " + dir), std::string::npos) << r.output;
  EXPECT_EQ(files_in(dir + "/weights"), (std::vector<std::string>{"latest", "step_" + std::to_string(s1) + ".gguf"}));
  EXPECT_EQ(files_in(dir + "/state"), (std::vector<std::string>{"step_" + std::to_string(s1) + ".gguf"}));

  // SIGINT (Ctrl-C) during the resumed run.
  r = interrupt(resume_args(GGTRAIN_BIN, dir), dir, 20, SIGINT, tmp / "int.out");
  ASSERT_EQ(r.status, 128 + SIGINT) << r.output;
  const int64_t s2 = train::latest_step(dir);
  ASSERT_GT(s2, s1);
  ASSERT_LT(s2, kSteps) << "the run ended before the signal arrived";
  EXPECT_NE(r.output.find("SIGINT received"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resume with: ggtrain train --resume --run-dir " + dir), std::string::npos);

  // Resume to the end: the same tensors as the uninterrupted run.
  r = run_cli(resume_args(GGTRAIN_BIN, dir), tmp / "end.out");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_EQ(train::latest_step(dir), kSteps);
  std::string why;
  EXPECT_TRUE(same_tensor_data(train::weights_path(clean, kSteps), train::weights_path(dir, kSteps), &why)) << why;
  EXPECT_TRUE(same_tensor_data(train::state_path(clean, kSteps), train::state_path(dir, kSteps), &why)) << why;
}

TEST(Signals, MaskAndDispositionsAreRestoredAndIgnoredSignalsStayIgnored) {
  TempDir tmp("ggtrain_signal_handlers");
  write_synthetic_corpus(tmp / "corpus.txt", 400);
  struct sigaction ign {
  }, before_int{}, after_int{}, after_term{};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGTERM, &ign, nullptr);  // like `nohup` or `cmd &`
  ::sigaction(SIGINT, nullptr, &before_int);
  sigset_t before_mask, after_mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &before_mask);
  train::TrainOptions o;
  o.run_dir = tmp / "r";
  o.config = tiny_run_config(tmp / "corpus.txt", 3);
  o.quiet = true;
  auto sum = train::run_training(o);
  EXPECT_EQ(sum.interrupted_by, 0);
  ::sigaction(SIGINT, nullptr, &after_int);
  ::sigaction(SIGTERM, nullptr, &after_term);
  ::pthread_sigmask(SIG_BLOCK, nullptr, &after_mask);
  EXPECT_EQ(after_int.sa_handler, before_int.sa_handler);
  EXPECT_EQ(after_term.sa_handler, SIG_IGN);
  for (int sig : {SIGINT, SIGTERM}) EXPECT_EQ(sigismember(&after_mask, sig), sigismember(&before_mask, sig)) << sig;
  ::signal(SIGTERM, SIG_DFL);
}

TEST(Signals, SignalDuringSetupEndsTheProcessAsUsual) {
  // Before the step loop there is nothing to save: the default action.
  TempDir tmp("ggtrain_signal_setup");
  write_synthetic_corpus(tmp / "corpus.txt", 20000);  // tokenizer training takes a while
  const pid_t pid =
      spawn_cli(tiny_train_args(GGTRAIN_BIN, tmp / "r", tmp / "corpus.txt", {"data.vocab_size=2000"}), tmp / "out.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const bool loop_started = logged_steps(tmp / "r") > 0;
  ::kill(pid, SIGTERM);
  const CliResult r = wait_cli(pid, tmp / "out.txt");
  if (loop_started) GGTRAIN_SKIP("training started within 100 ms: the signal did not land during setup");
  EXPECT_EQ(r.status, -SIGTERM) << r.output;
  EXPECT_EQ(train::latest_step(tmp / "r"), -1);
}
