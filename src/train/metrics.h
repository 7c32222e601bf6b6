#pragma once
// RUN/metrics.jsonl (one JSON object per step and per evaluation),
// RUN/loss.svg (train and validation loss against step), when the run
// scores multiple-choice tasks RUN/tasks.svg (each task file's acc_norm
// against step), and for GRPO RUN/reward.svg, kept current.
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ggtrain::train {

// A JSONL file of records that each carry a "step" (metrics.jsonl, GRPO's
// rollouts.jsonl), appended as a run goes. On resume it keeps only the
// records of steps <= resume_step (a crashed run may have logged steps past
// its last checkpoint), each shown to `kept`; -1 starts a new file.
// write = false: touches no file (data-parallel ranks other than 0).
class StepRecordFile {
 public:
  StepRecordFile(std::string path, int64_t resume_step, bool write = true,
                 const std::function<void(const nlohmann::json&)>& kept = {});
  void append(const nlohmann::json& record);

 private:
  std::string path_;
  bool write_ = true;
  std::ofstream out_;
};

class MetricsLog {
 public:
  // On resume, keeps only the records of steps <= resume_step (a crashed run
  // may have logged steps past its last checkpoint); -1 starts a new file.
  // write = false: a log that touches no file (data-parallel ranks other
  // than 0, whose records rank 0 already writes).
  MetricsLog(std::string run_dir, int64_t resume_step, bool write = true);
  void log_step(const nlohmann::json& record);  // needs "step" and "loss"
  void log_eval(const nlohmann::json& record);  // needs "step" and "val_loss"
  // Any other record with a "step"; one with "task" and "acc_norm" (a task
  // file's score) also goes into tasks.svg.
  void log_record(const nlohmann::json& record);
  void write_plot() const;  // atomic writes of loss.svg and tasks.svg

 private:
  void keep_point(const nlohmann::json& record);  // a record's values for the plots
  std::string run_dir_;
  bool write_ = true;
  std::vector<std::pair<double, double>> train_, val_;
  std::vector<std::pair<double, double>> reward_, val_reward_;  // GRPO's, for reward.svg
  std::map<std::string, std::vector<std::pair<double, double>>> tasks_;  // task file -> (step, acc_norm)
  StepRecordFile file_;  // last: reading it back on resume fills the series above
};

// An SVG line chart of one or two series (x = step, y = loss) under
// `title`; validation points are also drawn as dots.
std::string loss_svg(const std::vector<std::pair<double, double>>& train,
                     const std::vector<std::pair<double, double>>& val, const std::string& title);

}  // namespace ggtrain::train
