#pragma once
// A training run end to end: tokenizer, token files, model, the step loop
// (accumulation, clipping, AdamW, schedule), evaluation, samples, metrics and
// checkpoints; or the same run resumed exactly from its latest checkpoint.
#include <cstdint>
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
  double first_loss = 0, last_loss = 0, last_val_loss = 0, tokens_per_s = 0;
  std::string final_weights;
};

TrainSummary run_training(const TrainOptions& opts);

// Config of a run to resume: the one saved with its latest checkpoint.
RunConfig saved_run_config(const std::string& run_dir);

}  // namespace ggtrain::train
