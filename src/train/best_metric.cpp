#include "train/best_metric.h"

#include <cmath>
#include <filesystem>

#include "util/error.h"

namespace ggtrain::train {

namespace {

constexpr std::string_view kTask = "task:";

}  // namespace

void check_keep_best(std::string_view metric) {
  if (metric.empty() || metric == "val_loss" || metric == "bpb") return;
  if (metric.starts_with(kTask) && metric.size() > kTask.size()) return;
  fail("config: checkpoint.keep_best must be \"\" (off), \"val_loss\", \"bpb\" or \"task:NAME\" (a "
       "train.eval_tasks file), not \"{}\"",
       metric);
}

bool better_on(std::string_view metric, double value, double best) {
  if (!std::isfinite(value)) return false;
  if (!std::isfinite(best)) return true;
  return metric.starts_with(kTask) ? value > best : value < best;
}

bool names_task(std::string_view metric, const std::string& task_path) {
  if (!metric.starts_with(kTask)) return false;
  const std::string_view name = metric.substr(kTask.size());
  return name == task_path || name == std::filesystem::path(task_path).filename().string();
}

}  // namespace ggtrain::train
