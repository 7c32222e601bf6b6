// SIGKILL at random moments (some during checkpoint writes): `latest` must
// always resolve to a complete, loadable pair, and resuming after every kill
// must end bit-identical to an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "gguf/reader.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

// Runs the ggtrain CLI; kills it after `kill_after_ms` (< 0: let it finish).
// Returns the exit status, or -SIGKILL when killed.
int run_cli(const std::vector<std::string>& args, int kill_after_ms) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (kill_after_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms));
    kill(pid, SIGKILL);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::vector<std::string> train_args(const std::string& dir, const std::string& corpus, bool resume) {
  std::vector<std::string> a{GGTRAIN_BIN, "train", "--run-dir", dir, "--quiet"};
  if (resume) return a.insert(a.end(), "--resume"), a;
  for (const char* s : {"train.steps=150", "train.threads=1", "checkpoint.every=1",
                        "checkpoint.keep_last=3", "train.eval_every=0"}) {
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

}  // namespace

TEST(Kill, Sigkill20TimesThenResumeIsBitIdentical) {
  TempDir tmp("ggtrain_kill");
  const std::string corpus = tmp / "corpus.txt";
  test_support::write_synthetic_corpus(corpus, 1200);
  ASSERT_EQ(run_cli(train_args(tmp / "clean", corpus, false), -1), 0);

  const std::string dir = tmp / "killed";
  uint64_t seed = 2026;
  int kills = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const int delay_ms = 20 + int((seed >> 33) % 250);
    const bool resume = train::latest_step(dir) >= 0;
    int rc = run_cli(train_args(dir, corpus, resume), delay_ms);
    std::printf("attempt %d: %s after %d ms, latest step %lld\n", attempt,
                rc == -SIGKILL ? "killed" : "finished", delay_ms, (long long)train::latest_step(dir));
    if (rc == -SIGKILL) ++kills;
    else ASSERT_EQ(rc, 0) << "attempt " << attempt;
    expect_latest_is_complete(dir);
    if (rc == 0) break;  // the run finished before the kill
  }
  // Finish the run, then compare with the uninterrupted one.
  if (train::latest_step(dir) != 150) {
    ASSERT_EQ(run_cli(train_args(dir, corpus, train::latest_step(dir) >= 0), -1), 0);
  }
  std::printf("SIGKILLed %d times\n", kills);
  EXPECT_GE(kills, 5);
  std::string why;
  EXPECT_TRUE(test_support::same_tensor_data(train::weights_path(tmp / "clean", 150),
                                             train::weights_path(dir, 150), &why)) << why;
  EXPECT_TRUE(test_support::same_tensor_data(train::state_path(tmp / "clean", 150),
                                             train::state_path(dir, 150), &why)) << why;
}
