#pragma once
// checkpoint.keep_best: RUN/weights/best.gguf, a relative link to the
// checkpoint whose evaluation scored best so far on one metric, and
// RUN/weights/best.json (metric, value, step) beside it. best.json is
// written first and the link moved after it, each atomically, and only to a
// checkpoint already complete; keep_last never deletes the link's target.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ggtrain::train {

struct BestCheckpoint {
  std::string metric;  // checkpoint.keep_best's value
  double value = 0;
  int64_t step = 0;
};

// checkpoint.keep_best: "" (off), "val_loss", "bpb" (validation bits per
// byte) or "task:NAME" (the acc_norm of the train.eval_tasks file NAME, its
// path or file name). Error naming the key otherwise.
void check_keep_best(std::string_view metric);
// Whether `value` beats `best` on `metric` (losses lower, accuracies higher;
// a tie keeps the earlier step).
bool better_on(std::string_view metric, double value, double best);
// Whether a train.eval_tasks entry is the file "task:NAME" names.
bool names_task(std::string_view metric, const std::string& task_path);

// RUN/weights/best.json, or nullopt when there is none. Error naming the
// file when it is not what write_best writes.
std::optional<BestCheckpoint> read_best(const std::string& run_dir);
// best.json, then the weights/best.gguf link to weights/step_N.gguf (which
// must exist).
void write_best(const std::string& run_dir, const BestCheckpoint& best);

}  // namespace ggtrain::train
