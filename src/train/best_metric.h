#pragma once
// checkpoint.keep_best's metrics: which names it takes, which way each is
// better, and which train.eval_tasks file a "task:NAME" names. Pure rules,
// shared by the config check and the run (train/best_checkpoint.h).
#include <string>
#include <string_view>

namespace ggtrain::train {

// "" (off), "val_loss", "bpb" (validation bits per byte) or "task:NAME" (the
// acc_norm of the train.eval_tasks file NAME, its path or file name). Error
// naming the key otherwise.
void check_keep_best(std::string_view metric);
// Whether `value` beats `best` on `metric` (losses lower, accuracies higher;
// a tie keeps the earlier step; a non-finite value never wins, a non-finite
// best always loses).
bool better_on(std::string_view metric, double value, double best);
// Whether a train.eval_tasks entry is the file "task:NAME" names.
bool names_task(std::string_view metric, const std::string& task_path);

}  // namespace ggtrain::train
