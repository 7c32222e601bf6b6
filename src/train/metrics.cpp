#include "train/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/line_chart.h"

namespace ggtrain::train {

StepRecordFile::StepRecordFile(std::string path, int64_t resume_step, bool write,
                               const std::function<void(const nlohmann::json&)>& kept)
    : path_(std::move(path)), write_(write) {
  if (!write_) return;
  std::string lines;
  if (resume_step >= 0) {
    std::ifstream in(path_);
    // Lines that are not a record with an integer step (a torn or edited
    // line) are dropped.
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
          j["step"].get<int64_t>() > resume_step)
        continue;
      lines += line + "\n";
      if (kept) kept(j);
    }
    write_file_atomic(path_, lines.data(), lines.size());
  }
  out_.open(path_, resume_step >= 0 ? std::ios::app : std::ios::trunc);
  if (!out_) fail("{}: cannot open for writing", path_);
}

void StepRecordFile::append(const nlohmann::json& record) {
  if (!write_) return;
  out_ << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
  if (!out_) fail("{}: cannot append a record (disk full?)", path_);
}

// NaN/Inf losses were written as null: kept in the file, not plotted.
MetricsLog::MetricsLog(std::string run_dir, int64_t resume_step, bool write)
    : run_dir_(std::move(run_dir)),
      write_(write),
      file_(run_dir_ + "/metrics.jsonl", resume_step, write, [this](const nlohmann::json& j) { keep_point(j); }) {}

// NaN/Inf losses were written as null: left out of the plots.
void MetricsLog::keep_point(const nlohmann::json& j) {
  const double step = j.at("step").get<double>();
  auto number = [&](const char* key) { return j.contains(key) && j[key].is_number(); };
  if (j.contains("loss")) train_.emplace_back(step, number("loss") ? j["loss"].get<double>() : NAN);
  if (number("val_loss")) val_.emplace_back(step, j["val_loss"].get<double>());
  if (number("reward") && j.contains("loss")) reward_.emplace_back(step, j["reward"].get<double>());
  if (number("val_reward")) val_reward_.emplace_back(step, j["val_reward"].get<double>());
  if (j.contains("task") && j["task"].is_string() && number("acc_norm"))
    tasks_[j["task"].get<std::string>()].emplace_back(step, j["acc_norm"].get<double>());
}

void MetricsLog::log_step(const nlohmann::json& r) {
  file_.append(r);
  keep_point(r);
}

void MetricsLog::log_eval(const nlohmann::json& r) {
  file_.append(r);
  keep_point(r);
}

void MetricsLog::log_record(const nlohmann::json& r) {
  file_.append(r);
  keep_point(r);
}

void MetricsLog::write_plot() const {
  if (!write_) return;
  const std::string svg = loss_svg(train_, val_, run_dir_ + ": training and validation loss");
  write_file_atomic(run_dir_ + "/loss.svg", svg.data(), svg.size());
  if (!reward_.empty()) {
    const std::string rewards = line_chart_svg({{"reward (sampled replies)", "#2ca02c", reward_, false},
                                                {"validation reward (greedy)", "#d62728", val_reward_, true}},
                                               "reward", run_dir_ + ": GRPO reward");
    write_file_atomic(run_dir_ + "/reward.svg", rewards.data(), rewards.size());
  }
  if (tasks_.empty()) return;
  static const char* kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  std::vector<ChartSeries> series;
  for (const auto& [task, points] : tasks_)
    series.push_back({task, kColors[series.size() % std::size(kColors)], points, true});
  const std::string tasks = line_chart_svg(series, "acc_norm", run_dir_ + ": multiple-choice tasks");
  write_file_atomic(run_dir_ + "/tasks.svg", tasks.data(), tasks.size());
}

std::string loss_svg(const std::vector<std::pair<double, double>>& train,
                     const std::vector<std::pair<double, double>>& val, const std::string& title) {
  return line_chart_svg({{"train loss", "#1f77b4", train, false}, {"validation loss", "#d62728", val, true}}, "loss",
                        title);
}

}  // namespace ggtrain::train
