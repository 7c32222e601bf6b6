// SIGKILL at random moments (some during checkpoint writes): `latest` must
// always resolve to a complete, loadable pair, and resuming after every kill
// must end bit-identical to an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "gguf/reader.h"
#include "support/run_helpers.h"
#include "train/best_checkpoint.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

// Enough steps that 20 kills, each after at least one new checkpoint and up
// to 40 ms more, do not reach the end.
constexpr int64_t kSteps = 150;

// Runs the ggtrain CLI. With kill_after_progress, waits until `latest`
// has moved past where it was at the start (a checkpoint was written by this
// process), then waits `extra_ms` more (0-39 ms: the kill can land in the
// middle of the next checkpoint's writes) and SIGKILLs it. Returns the exit
// status, or -SIGKILL when killed.
int run_cli(const std::vector<std::string>& args, const std::string& dir, bool kill_after_progress, int extra_ms = 0) {
  const int64_t start_step = train::latest_step(dir);
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  // Negative control (GGTRAIN_KILL_TEST_CONTROL=early): the old way, a kill
  // a few ms after the start, before any checkpoint; the test must fail.
  if (kill_after_progress && std::getenv("GGTRAIN_KILL_TEST_CONTROL")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + extra_ms / 10));
    kill(pid, SIGKILL);
  } else if (kill_after_progress) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (train::latest_step(dir) <= start_step && std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid, &status, WNOHANG) == pid) return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(extra_ms));
    kill(pid, SIGKILL);
  }
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::vector<std::string> train_args(const std::string& dir, const std::string& corpus, bool resume,
                                    const std::vector<std::string>& sets = {"train.eval_every=0"}) {
  std::vector<std::string> a{GGTRAIN_BIN, "train", "--run-dir", dir, "--quiet"};
  if (resume) return a.insert(a.end(), "--resume"), a;
  std::vector<std::string> all{"train.steps=" + std::to_string(kSteps), "train.threads=1", "checkpoint.every=1",
                               "checkpoint.keep_last=3"};
  all.insert(all.end(), sets.begin(), sets.end());
  for (const std::string& s : all) {
    a.push_back("--set");
    a.push_back(s);
  }
  a.insert(a.end(), {"--preset", "tiny", "--set", "data.corpus=" + corpus});
  return a;
}

void expect_latest_is_complete(const std::string& dir) {
  const int64_t step = train::latest_step(dir);
  if (step < 0) return;  // killed before the first checkpoint
  gguf::GgufFile w(train::weights_path(dir, step));
  gguf::GgufFile s(train::state_path(dir, step));
  EXPECT_EQ(w.get_uint("general.step"), uint64_t(step));
  EXPECT_EQ(s.get_uint("ggtrain.step"), uint64_t(step));
  EXPECT_EQ(s.tensors().size(), 2 * w.tensors().size());
}

// checkpoint.keep_best: the link, when there is one, names a complete
// checkpoint, and best.json is never behind it (it is written first).
void expect_best_is_complete(const std::string& dir) {
  const std::string link = dir + "/weights/best.gguf";
  if (!std::filesystem::is_symlink(link)) return;
  const auto rec = train::read_best(dir);
  ASSERT_TRUE(rec.has_value()) << "weights/best.gguf without best.json";
  gguf::GgufFile w(link);
  const int64_t step = int64_t(w.get_uint("general.step"));
  EXPECT_EQ(std::filesystem::read_symlink(link).string(), "step_" + std::to_string(step) + ".gguf");
  EXPECT_GE(rec->step, step);
  EXPECT_LE(step, train::latest_step(dir));
}

}  // namespace

// SIGKILLs during a run that keeps its best validation loss (evaluated every
// other step on reversed lines, whose loss falls and rises again): after every
// resume it ends with the uninterrupted run's best (step and value), its
// link on that step's checkpoint.
TEST(Kill, KeepBestSurvivesSigkillAndResume) {
  TempDir tmp("ggtrain_kill_best");
  const std::string corpus = tmp / "corpus.txt";
  test_support::write_synthetic_corpus(corpus, 1200);
  test_support::write_reversed_lines(corpus, tmp / "reversed.txt", 400);
  const std::vector<std::string> sets{"train.eval_every=2",      "checkpoint.keep_best=val_loss",
                                      "train.lr_max=0.01",       "train.lr_min=0.01",
                                      "train.schedule=constant", "data.val_corpus=" + (tmp / "reversed.txt")};
  ASSERT_EQ(run_cli(train_args(tmp / "clean", corpus, false, sets), tmp / "clean", false), 0);
  const auto clean = train::read_best(tmp / "clean");
  ASSERT_TRUE(clean.has_value());
  EXPECT_LT(clean->step, kSteps - 10) << "the best is at the end: resumes would not have to keep an older one";

  const std::string dir = tmp / "killed";
  uint64_t seed = 77;
  int kills = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const int64_t from = train::latest_step(dir);
    const int rc = run_cli(train_args(dir, corpus, from >= 0, sets), dir, true, int((seed >> 33) % 40));
    if (rc == -SIGKILL) ++kills;
    else ASSERT_EQ(rc, 0) << "attempt " << attempt;
    expect_latest_is_complete(dir);
    expect_best_is_complete(dir);
    if (rc == 0) break;
  }
  if (train::latest_step(dir) != kSteps) {
    ASSERT_EQ(run_cli(train_args(dir, corpus, true, sets), dir, false), 0);
  }
  EXPECT_GE(kills, 8);
  const auto killed = train::read_best(dir);
  ASSERT_TRUE(killed.has_value());
  EXPECT_EQ(killed->step, clean->step);
  EXPECT_EQ(killed->value, clean->value);
  EXPECT_EQ(std::filesystem::read_symlink(dir + "/weights/best.gguf"),
            std::filesystem::read_symlink(tmp / "clean/weights/best.gguf"));
  expect_best_is_complete(dir);
}

TEST(Kill, Sigkill20TimesThenResumeIsBitIdentical) {
  TempDir tmp("ggtrain_kill");
  const std::string corpus = tmp / "corpus.txt";
  test_support::write_synthetic_corpus(corpus, 1200);
  ASSERT_EQ(run_cli(train_args(tmp / "clean", corpus, false), tmp / "clean", false), 0);

  const std::string dir = tmp / "killed";
  uint64_t seed = 2026;
  int kills = 0, resumes_from_checkpoint = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const int extra_ms = int((seed >> 33) % 40);
    const int64_t from = train::latest_step(dir);
    if (attempt > 0 && from > 0) ++resumes_from_checkpoint;
    const int rc = run_cli(train_args(dir, corpus, from >= 0), dir, true, extra_ms);
    std::printf("attempt %d: started from step %lld, %s %d ms after its first checkpoint, latest step %lld\n", attempt,
                (long long)from, rc == -SIGKILL ? "killed" : "finished", extra_ms, (long long)train::latest_step(dir));
    if (rc == -SIGKILL) ++kills;
    else ASSERT_EQ(rc, 0) << "attempt " << attempt;
    expect_latest_is_complete(dir);
    if (rc == 0) break;  // the run finished before the kill
  }
  // Finish the run (one more resume), then compare with the uninterrupted one.
  if (train::latest_step(dir) != kSteps) {
    if (train::latest_step(dir) > 0) ++resumes_from_checkpoint;
    ASSERT_EQ(run_cli(train_args(dir, corpus, train::latest_step(dir) >= 0), dir, false), 0);
  }
  std::printf("SIGKILLed %d times, %d resumes started from a checkpoint after step 0\n", kills,
              resumes_from_checkpoint);
  // Every kill comes after a checkpoint of that process, so each resume
  // starts from a real checkpoint: the comparison below is between an
  // interrupted run and an uninterrupted one, not two uninterrupted runs.
  EXPECT_EQ(kills, 20);
  EXPECT_GE(resumes_from_checkpoint, 15);
  std::string why;
  EXPECT_TRUE(test_support::same_tensor_data(train::weights_path(tmp / "clean", kSteps),
                                             train::weights_path(dir, kSteps), &why))
      << why;
  EXPECT_TRUE(
      test_support::same_tensor_data(train::state_path(tmp / "clean", kSteps), train::state_path(dir, kSteps), &why))
      << why;
}
