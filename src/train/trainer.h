#pragma once
// A training run end to end: tokenizer, token files, model, the step loop
// (accumulation, clipping, AdamW, schedule), evaluation, samples, metrics and
// checkpoints; or the same run resumed exactly from its latest checkpoint.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "train/run_config.h"

namespace ggtrain::train {

struct TrainOptions {
  std::string run_dir;
  RunConfig config;
  bool resume = false;
  bool quiet = false;  // no progress line (metrics.jsonl is still written)
  int64_t stop_at = 0;  // > 0: end this process after that step, with a checkpoint
};

struct TrainSummary {
  int64_t first_step = 0, last_step = 0;
  int64_t planned_steps = 0;  // train.steps
  double first_loss = 0, last_loss = 0, tokens_per_s = 0;
  double last_val_loss = NAN;  // NAN when no evaluation ran (train.eval_every = 0)
  std::string final_weights;
  int64_t nonfinite_steps = 0;  // updates skipped under train.on_nonfinite = "skip"
  int interrupted_by = 0;  // SIGINT/SIGTERM that ended the run early, else 0
};

// While it trains, SIGINT and SIGTERM do not kill the process: the current
// step finishes, a checkpoint is written, a line saying how to resume is
// printed and run_training returns normally (interrupted_by set). A second
// signal ends the process at once (the last complete checkpoint stays intact).
// No signal handler is involved (train/stop_signals.h says why); the
// calling thread's signal mask is restored when it returns. Before the step
// loop starts the signals act as usual. Tests inject faults through the
// environment: train/fault_injection.h.
TrainSummary run_training(const TrainOptions& opts);

// `body` as the whole life of this rank's `train` command (reading its
// config, then run_training): a failure anywhere in it ends every rank
// (parallel::end_every_rank; run_training does so itself while the run's buffers
// are alive) and MPI is finalized on the way out, either way. The error is
// rethrown: an Error or out-of-memory as it is, another exception as an
// Error with its message, so that the command prints one line.
int on_every_rank(const std::function<int()>& body);

// Config of a run to resume: the one saved with its latest checkpoint.
RunConfig saved_run_config(const std::string& run_dir);

}  // namespace ggtrain::train
