#pragma once
// RUN/status.json: what the training process of a run folder is doing, for
// whoever watches the folder (`ggtrain serve`, `ggtrain report`): preparing
// (reading and tokenizing the data, building the model) and running (both
// with its process id and host, so a watcher can tell a process that died
// without a word), finished, stopped (a signal or --stop-at, resumable) or
// failed (with the error). Written atomically by rank 0 when the run folder
// is taken, when training starts and when it ends.
#include <cstdint>
#include <optional>
#include <string>

namespace ggtrain::train {

enum class RunState { kRunning, kFinished, kStopped, kFailed, kPreparing };

// preparing or running: a process should be alive behind it.
inline bool has_process(RunState s) { return s == RunState::kRunning || s == RunState::kPreparing; }

std::string_view run_state_name(RunState s);

struct RunStatus {
  RunState state = RunState::kRunning;
  int64_t pid = 0;
  std::string host;
  int64_t step = 0;  // the last step trained (checkpointed when stopped)
  int64_t steps = 0;  // train.steps
  std::string message;  // why it failed or stopped
  double updated_unix_s = 0;
};

// This process on this host, now.
RunStatus current_process_status(RunState state, int64_t step, int64_t steps, std::string message = "");

void write_run_status(const std::string& run_dir, const RunStatus& s);

// nullopt when there is no status.json; a file that is not one (torn by an
// editor, not JSON, fields of the wrong type) reads as nullopt too: the
// watcher then judges from the checkpoints.
std::optional<RunStatus> read_run_status(const std::string& run_dir);

// The host this process runs on (gethostname).
std::string host_name();

}  // namespace ggtrain::train
