#include "train/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "util/atomic_file.h"
#include "util/line_chart.h"
#include "util/error.h"

namespace ggtrain::train {

MetricsLog::MetricsLog(std::string run_dir, int64_t resume_step, bool write)
    : run_dir_(std::move(run_dir)), write_(write) {
  if (!write_) return;
  const std::string path = run_dir_ + "/metrics.jsonl";
  std::string kept;
  if (resume_step >= 0) {
    std::ifstream in(path);
    // Lines that are not a record with an integer step (a torn or edited
    // line) are dropped; NaN/Inf losses were written as null and are kept
    // in the file but not plotted.
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
          j["step"].get<int64_t>() > resume_step)
        continue;
      kept += line + "\n";
      const double step = j["step"].get<double>();
      if (j.contains("loss") && j["loss"].is_number()) train_.emplace_back(step, j["loss"].get<double>());
      if (j.contains("val_loss") && j["val_loss"].is_number())
        val_.emplace_back(step, j["val_loss"].get<double>());
    }
    write_file_atomic(path, kept.data(), kept.size());
  }
  out_.open(path, resume_step >= 0 ? std::ios::app : std::ios::trunc);
  if (!out_) fail("{}: cannot open for writing", path);
}

void MetricsLog::append(const nlohmann::json& record) {
  if (!write_) return;
  out_ << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
  if (!out_) fail("{}/metrics.jsonl: cannot append a record (disk full?)", run_dir_);
}

void MetricsLog::log_step(const nlohmann::json& r) {
  append(r);
  const double loss = r.at("loss").is_number() ? r.at("loss").get<double>() : NAN;
  train_.emplace_back(r.at("step").get<double>(), loss);
}

void MetricsLog::log_eval(const nlohmann::json& r) {
  append(r);
  val_.emplace_back(r.at("step").get<double>(), r.at("val_loss").get<double>());
}

void MetricsLog::log_record(const nlohmann::json& r) { append(r); }

void MetricsLog::write_plot() const {
  if (!write_) return;
  const std::string svg = loss_svg(train_, val_, run_dir_ + ": training and validation loss");
  write_file_atomic(run_dir_ + "/loss.svg", svg.data(), svg.size());
}

std::string loss_svg(const std::vector<std::pair<double, double>>& train,
                     const std::vector<std::pair<double, double>>& val, const std::string& title) {
  return line_chart_svg({{"train loss", "#1f77b4", train, false}, {"validation loss", "#d62728", val, true}}, "loss",
                        title);
}

}  // namespace ggtrain::train
