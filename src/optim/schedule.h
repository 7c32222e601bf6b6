#pragma once
// Learning-rate schedules. `step` is 0-indexed: the lr used by update step+1.
#include <cstdint>
#include <string>

namespace ggtrain::optim {

enum class ScheduleKind { Constant, Cosine, Wsd };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Cosine;
  double lr_max = 3e-4;
  double lr_min = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double decay_fraction = 0.2;  // wsd: share of total_steps spent decaying

  // constant: lr_max * warmup ramp; cosine: warmup lr_max*(step+1)/warmup,
  // then lr_min + 0.5*(lr_max-lr_min)*(1+cos(pi*p)), p=(step-warmup)/(total-warmup)
  // clamped to 1 (lr_min if total <= warmup); wsd: warmup, lr_max, then a
  // linear decay to lr_min over the last decay_fraction of the steps.
  double lr_at(int64_t step) const;
};

ScheduleKind schedule_kind_from_name(const std::string& name);  // throws on unknown

}  // namespace ggtrain::optim
