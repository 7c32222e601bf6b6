// A checkpoint that cannot be written (file-size limit, full filesystem,
// folder made read-only mid-run) must end the run with a non-zero exit and
// an error naming the file, leave the previous checkpoint intact with
// weights/latest still on it, and leave no partial, temporary or orphan file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <thread>

#include "gguf/reader.h"
#include "support/cli_runner.h"
#include "support/run_helpers.h"
#include "support/skip.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using namespace ggtrain::test_support;
namespace fs = std::filesystem;

namespace {

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> run_args(const std::string& dir, const std::string& corpus, int steps) {
  return tiny_train_args(GGTRAIN_BIN, dir, corpus,
                         {"train.steps=" + std::to_string(steps), "checkpoint.every=10", "train.eval_every=0"});
}

// Every file under `dir` whose name marks an unfinished write.
std::vector<std::string> temp_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.find(".tmp") != std::string::npos) out.push_back(e.path().string());
  }
  return out;
}

int64_t max_step_in(const std::string& dir) {
  int64_t best = -1;
  static const std::regex re("step_([0-9]+)\\.gguf");
  for (const auto& n : files_in(dir)) {
    std::smatch m;
    if (std::regex_match(n, m, re)) best = std::max<int64_t>(best, std::stoll(m[1]));
  }
  return best;
}

// The checkpoint `latest` names, checked complete and unchanged, and the only
// files of steps after it absent.
void expect_intact(const std::string& dir, int64_t step, const std::string& weights_bytes,
                   const std::string& state_bytes) {
  EXPECT_EQ(train::latest_step(dir), step);
  EXPECT_EQ(max_step_in(dir + "/weights"), step) << "a file of a later step was left behind";
  EXPECT_EQ(max_step_in(dir + "/state"), step) << "a file of a later step was left behind";
  EXPECT_EQ(temp_files(dir), std::vector<std::string>{});
  if (!weights_bytes.empty()) {
    EXPECT_TRUE(slurp(train::weights_path(dir, step)) == weights_bytes) << "previous weights changed";
    EXPECT_TRUE(slurp(train::state_path(dir, step)) == state_bytes) << "previous state changed";
  }
  gguf::GgufFile w(train::weights_path(dir, step)), s(train::state_path(dir, step));
  EXPECT_EQ(s.tensors().size(), 2 * w.tensors().size());
}

}  // namespace

TEST(WriteFailures, FileSizeLimitDuringTheWeightsOrTheStateWrite) {
  TempDir tmp;
  const std::string corpus = tmp / "corpus.txt", dir = tmp / "r";
  write_synthetic_corpus(corpus, 800);
  auto a = run_args(dir, corpus, 40);
  a.insert(a.end(), {"--stop-at", "10"});
  ASSERT_EQ(run_cli(a, tmp / "out0.txt").status, 0);
  const std::string w10 = slurp(train::weights_path(dir, 10)), s10 = slurp(train::state_path(dir, 10));
  ASSERT_LT(w10.size(), s10.size());
  // A limit under the weights size fails the weights file; one between the
  // two sizes lets the weights through and fails the state file (whose
  // complete weights partner must then be removed too).
  const std::pair<unsigned long long, std::string> cases[] = {
      {w10.size() / 2, train::weights_path(dir, 20)}, {(w10.size() + s10.size()) / 2, train::state_path(dir, 20)}};
  for (const auto& [limit, failing] : cases) {
    CliOptions o;
    o.file_size_limit = limit;
    auto r = run_cli(resume_args(GGTRAIN_BIN, dir), tmp / "out.txt", o);
    EXPECT_EQ(r.status, 1) << r.output;
    const std::string msg = error_line(r.output);
    EXPECT_HAS(msg, "step 20: cannot write the checkpoint: " + failing + ": write failed after ");
    EXPECT_HAS(msg, "File too large");
    EXPECT_HAS(msg, "the last checkpoint " + train::weights_path(dir, 10) +
                        " is intact and weights/latest still points to it");
    expect_intact(dir, 10, w10, s10);
  }
  // Once there is room again the run resumes from that checkpoint and ends.
  auto r = run_cli(resume_args(GGTRAIN_BIN, dir), tmp / "out.txt");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(train::latest_step(dir), 40);
}

TEST(WriteFailures, FullFilesystemMidRun) {
  TempDir tmp;
  const std::string corpus = tmp / "corpus.txt";
  write_synthetic_corpus(corpus, 800);
  // The same run on an ordinary folder, stopped after its first checkpoint,
  // tells how much room that takes.
  auto a = run_args(tmp / "ref", corpus, 40);
  a.insert(a.end(), {"--stop-at", "10"});
  ASSERT_EQ(run_cli(a, tmp / "out0.txt").status, 0);
  uintmax_t used = 0;
  for (const auto& e : fs::recursive_directory_iterator(tmp / "ref"))
    if (e.is_regular_file() && !e.is_symlink()) used += (e.file_size() + 4095) / 4096 * 4096;
  const uintmax_t weights = fs::file_size(train::weights_path(tmp / "ref", 10));
  // Room for all of that plus half a weights file: the step-20 checkpoint
  // runs out of space in the middle of its weights file.
  const uintmax_t size = used + weights / 2 / 4096 * 4096 + 8192;
  const std::string mnt = tmp / "small_fs";
  fs::create_directories(mnt);
  const std::string opts = "size=" + std::to_string(size) + ",mode=0777";
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, opts.c_str()) != 0)
    GGTRAIN_SKIP(std::string("cannot mount a tmpfs here (") + std::strerror(errno) +
                 "); the RLIMIT_FSIZE test covers the same path");
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};

  const std::string dir = mnt + "/r";
  auto r = run_cli(run_args(dir, corpus, 40), tmp / "out.txt");
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string msg = error_line(r.output);
  EXPECT_HAS(msg, "step 20: cannot write the checkpoint: " + train::weights_path(dir, 20));
  EXPECT_HAS(msg, "No space left on device");
  EXPECT_HAS(
      msg, "the last checkpoint " + train::weights_path(dir, 10) + " is intact and weights/latest still points to it");
  expect_intact(dir, 10, "", "");
  std::string why;
  EXPECT_TRUE(same_tensor_data(train::weights_path(tmp / "ref", 10), train::weights_path(dir, 10), &why)) << why;
  EXPECT_TRUE(same_tensor_data(train::state_path(tmp / "ref", 10), train::state_path(dir, 10), &why)) << why;
}

TEST(WriteFailures, CheckpointFoldersMadeReadOnlyMidRun) {
  TempDir tmp;
  const std::string corpus = tmp / "corpus.txt", dir = tmp / "r";
  write_synthetic_corpus(corpus, 800);
  // Root ignores permissions: run the CLI as an unprivileged user then, from
  // a copy of the binary in this test's folder (the build folder may sit
  // under one only root can enter, as a clone in `mktemp -d` does).
  CliOptions o;
  o.as_nobody = ::geteuid() == 0;
  auto args = run_args(dir, corpus, 1000000);
  if (o.as_nobody) {
    fs::permissions(tmp.path(), fs::perms::all);
    args[0] = tmp / "ggtrain";
    fs::copy_file(GGTRAIN_BIN, args[0]);
    // A portable build's launcher starts ggtrain-vN from its own folder.
    for (const auto& e : fs::directory_iterator(fs::path(GGTRAIN_BIN).parent_path()))
      if (e.path().filename().string().rfind("ggtrain-", 0) == 0)
        fs::copy_file(e.path(), tmp / e.path().filename().string());
    auto v = run_cli({args[0], "--version"}, tmp / "version.txt", o);
    if (v.status != 0)
      GGTRAIN_SKIP("the ggtrain binary cannot run as uid 65534 here (status " + std::to_string(v.status) + ")");
  }
  const pid_t pid = spawn_cli(args, tmp / "out.txt", o);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (train::latest_step(dir) < 10 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_GE(train::latest_step(dir), 10);
  // Freeze the run between two checkpoints (no temporary file, both folders
  // at the step `latest` names), make both folders read-only, let it go on.
  int64_t at = -1;
  for (int attempt = 0; attempt < 1000 && at < 0; ++attempt) {
    ::kill(pid, SIGSTOP);
    int st = 0;
    ::waitpid(pid, &st, WUNTRACED);
    const int64_t latest = train::latest_step(dir);
    if (temp_files(dir).empty() && max_step_in(dir + "/weights") == latest && max_step_in(dir + "/state") == latest) {
      at = latest;
      break;
    }
    ::kill(pid, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(at, 10);
  const auto ro = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                  fs::perms::others_read | fs::perms::others_exec;
  fs::permissions(dir + "/weights", ro);
  fs::permissions(dir + "/state", ro);
  const std::string w = slurp(train::weights_path(dir, at)), s = slurp(train::state_path(dir, at));
  ::kill(pid, SIGCONT);
  const CliResult r = wait_cli(pid, tmp / "out.txt");
  fs::permissions(dir + "/weights", fs::perms::owner_all, fs::perm_options::add);
  fs::permissions(dir + "/state", fs::perms::owner_all, fs::perm_options::add);

  EXPECT_EQ(r.status, 1) << r.output;
  const std::string msg = error_line(r.output);
  EXPECT_HAS(msg, "step " + std::to_string(at + 10) + ": cannot write the checkpoint: " +
                      train::weights_path(dir, at + 10) + ": cannot create temporary file: Permission denied");
  EXPECT_HAS(
      msg, "the last checkpoint " + train::weights_path(dir, at) + " is intact and weights/latest still points to it");
  expect_intact(dir, at, w, s);
}
