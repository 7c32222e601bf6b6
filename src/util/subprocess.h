#pragma once
// A shell command run to completion with text on its stdin, its stdout and
// stderr collected, under a deadline: a command that hangs is killed (its
// whole process group), one that prints without end is stopped at a cap,
// and one that exits early never kills the caller with SIGPIPE.
#include <cstddef>
#include <string>

namespace ggtrain {

struct CommandResult {
  int exit_code = -1;  // when it exited
  int signal = 0;  // when a signal ended it (SIGKILL after the deadline)
  bool timed_out = false, output_capped = false;
  std::string out, err;
  bool ok() const { return exit_code == 0 && signal == 0 && !timed_out && !output_capped; }
  // "exited with status 2", "was killed by signal 11", "did not finish
  // within 5 s", ..., and its stderr's last line when there is one.
  std::string failure() const;
};

// Runs `/bin/sh -c command`; stdout beyond max_output bytes ends it.
CommandResult run_command(const std::string& command, const std::string& input, double timeout_s,
                          size_t max_output = size_t(64) << 20);

}  // namespace ggtrain
