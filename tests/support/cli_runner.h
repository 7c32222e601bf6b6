#pragma once
// Runs the ggtrain CLI (GGTRAIN_BIN) in a child process, the way a user or a
// job scheduler would: its stdout and stderr go to a file, and the child may
// get extra environment variables, a file-size limit (RLIMIT_FSIZE, the
// kernel then fails writes with EFBIG as on a full disk) or, when the tests
// run as root, an unprivileged user (so that folder permissions apply).
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace ggtrain::test_support {

struct CliOptions {
  std::vector<std::pair<std::string, std::string>> env;  // set in the child
  unsigned long long file_size_limit = 0;  // RLIMIT_FSIZE in bytes when > 0
  bool as_nobody = false;  // when root: setuid/setgid 65534 before exec
};

struct CliResult {
  int status = 0;  // exit code, or -signal when killed by a signal
  std::string output;  // stdout + stderr
};

// Starts `args` (args[0] is the binary); output goes to out_path.
pid_t spawn_cli(const std::vector<std::string>& args, const std::string& out_path, const CliOptions& opts = {});
// Waits for a child started by spawn_cli and reads its output.
CliResult wait_cli(pid_t pid, const std::string& out_path);
// spawn_cli + wait_cli.
CliResult run_cli(const std::vector<std::string>& args, const std::string& out_path, const CliOptions& opts = {});

// The line "ggtrain: error: ..." of an output, without that prefix ("" if none).
std::string error_line(const std::string& output);

// `ggtrain train` with the tiny preset, single-threaded and quiet, on `corpus`,
// plus `--set` for each of `sets`.
std::vector<std::string> tiny_train_args(const std::string& bin, const std::string& run_dir, const std::string& corpus,
                                         const std::vector<std::string>& sets = {});
std::vector<std::string> resume_args(const std::string& bin, const std::string& run_dir,
                                     const std::vector<std::string>& sets = {});

// Names of the files in `dir` (not recursive), sorted.
std::vector<std::string> files_in(const std::string& dir);

}  // namespace ggtrain::test_support
