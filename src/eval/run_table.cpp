#include "eval/run_table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/line_chart.h"

namespace ggtrain::eval {

namespace {

std::string field(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : ""; }

nlohmann::json value(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

void write_text(const std::string& path, const std::string& text, std::vector<std::string>& written) {
  write_file_atomic(path, text.data(), text.size());
  written.push_back(path);
}

std::vector<std::pair<double, double>> curve(const std::vector<CheckpointScores>& rows,
                                             double CheckpointScores::*metric) {
  std::vector<std::pair<double, double>> points;
  for (const auto& r : rows) points.emplace_back(double(r.step), r.*metric);
  return points;
}

}  // namespace

std::string scores_csv(const std::vector<CheckpointScores>& rows) {
  std::string csv = "step,file,ppl,bpb,acc,acc_norm,gold_logprob\n";
  for (const auto& r : rows)
    csv += fmt::format("{},{},{},{},{},{},{}\n", r.step, r.file, field(r.ppl), field(r.bpb), field(r.acc),
                       field(r.acc_norm), field(r.gold_logprob));
  return csv;
}

std::vector<std::string> write_run_scores(const std::string& run_dir, const std::vector<CheckpointScores>& rows,
                                          const std::string& text_path, const std::string& task_path) {
  std::vector<std::string> written;
  write_text(run_dir + "/eval.csv", scores_csv(rows), written);
  auto list = nlohmann::json::array();
  for (const auto& r : rows)
    list.push_back({{"step", r.step},
                    {"file", r.file},
                    {"ppl", value(r.ppl)},
                    {"bpb", value(r.bpb)},
                    {"acc", value(r.acc)},
                    {"acc_norm", value(r.acc_norm)},
                    {"gold_logprob", value(r.gold_logprob)}});
  const nlohmann::json doc{{"run", run_dir}, {"text", text_path}, {"task", task_path}, {"checkpoints", list}};
  write_text(run_dir + "/eval.json", doc.dump(1) + "\n", written);
  if (!text_path.empty())
    write_text(run_dir + "/eval_text.svg",
               line_chart_svg({{"bits per byte", "#1f77b4", curve(rows, &CheckpointScores::bpb), true}},
                              "bits per byte", run_dir + ": " + text_path),
               written);
  if (!task_path.empty())
    write_text(run_dir + "/eval_task.svg",
               line_chart_svg({{"acc_norm", "#d62728", curve(rows, &CheckpointScores::acc_norm), true},
                               {"acc", "#1f77b4", curve(rows, &CheckpointScores::acc), true}},
                              "accuracy", run_dir + ": " + task_path),
               written);
  return written;
}

}  // namespace ggtrain::eval
