#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace ggtrain::optim {

double LrSchedule::lr_at(int64_t step) const {
  if (step < warmup_steps) return lr_max * double(step + 1) / double(warmup_steps);
  switch (kind) {
    case ScheduleKind::Constant: return lr_max;
    case ScheduleKind::Cosine: {
      if (total_steps <= warmup_steps) return lr_min;
      double p = double(step - warmup_steps) / double(total_steps - warmup_steps);
      p = std::min(p, 1.0);
      return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + std::cos(M_PI * p));
    }
    case ScheduleKind::Wsd: {
      const int64_t decay_steps = std::max<int64_t>(1, int64_t(std::llround(decay_fraction * double(total_steps))));
      const int64_t decay_start = std::max(warmup_steps, total_steps - decay_steps);
      if (step < decay_start) return lr_max;
      double p = double(step - decay_start) / double(std::max<int64_t>(1, total_steps - decay_start));
      p = std::min(p, 1.0);
      return lr_max + (lr_min - lr_max) * p;
    }
  }
  return lr_max;
}

ScheduleKind schedule_kind_from_name(const std::string& name) {
  if (name == "cosine") return ScheduleKind::Cosine;
  if (name == "constant") return ScheduleKind::Constant;
  if (name == "wsd") return ScheduleKind::Wsd;
  fail("unknown lr schedule '{}' (cosine, constant, wsd)", name);
}

}  // namespace ggtrain::optim
