#pragma once
// `ggtrain eval --run`: each checkpoint's scores as a table (RUN/eval.csv,
// RUN/eval.json) and charts against step (RUN/eval_text.svg, bits per byte;
// RUN/eval_task.svg, accuracies), each file written atomically.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ggtrain::eval {

struct CheckpointScores {
  int64_t step = 0;
  std::string file;  // its path
  // NAN where not measured (no --text, no --task).
  double ppl = NAN, bpb = NAN;
  double acc = NAN, acc_norm = NAN, gold_logprob = NAN;
};

// The CSV: a header line, then one line per checkpoint; a value not
// measured is an empty field.
std::string scores_csv(const std::vector<CheckpointScores>& rows);
// Writes eval.csv, eval.json and the charts of what was measured; returns
// the paths written.
std::vector<std::string> write_run_scores(const std::string& run_dir, const std::vector<CheckpointScores>& rows,
                                          const std::string& text_path, const std::string& task_path);

}  // namespace ggtrain::eval
