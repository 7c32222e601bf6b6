#pragma once
// checkpoint.keep_best: RUN/weights/best.gguf, a relative link to the
// checkpoint whose evaluation scored best so far on one metric, and
// RUN/weights/best.json (metric, value, step) beside it. best.json is
// written first and the link moved after it, each atomically, and only to a
// checkpoint already complete; keep_last never deletes the link's target.
#include <cstdint>
#include <optional>
#include <string>

#include "train/best_metric.h"

namespace ggtrain::train {

struct BestCheckpoint {
  std::string metric;  // checkpoint.keep_best's value
  double value = 0;
  int64_t step = 0;
};

// RUN/weights/best.json, or nullopt when there is none. Error naming the
// file when it is not what write_best writes.
std::optional<BestCheckpoint> read_best(const std::string& run_dir);
// best.json, then the weights/best.gguf link to weights/step_N.gguf (which
// must exist).
void write_best(const std::string& run_dir, const BestCheckpoint& best);

}  // namespace ggtrain::train
