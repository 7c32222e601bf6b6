#include <gtest/gtest.h>

#include <cmath>

#include "optim/schedule.h"
#include "util/error.h"

using namespace ggtrain::optim;

TEST(Schedule, CosineWarmupIsLinearFromOneStep) {
  LrSchedule s{ScheduleKind::Cosine, 1e-3, 1e-4, 10, 110, 0.2};
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1e-3 * 1 / 10);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 1e-3 * 5 / 10);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 1e-3);
}

TEST(Schedule, CosineDecaysToMin) {
  LrSchedule s{ScheduleKind::Cosine, 1e-3, 1e-4, 10, 110, 0.2};
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1e-3);  // p = 0
  EXPECT_DOUBLE_EQ(s.lr_at(60), 1e-4 + 0.5 * 9e-4 * (1 + std::cos(M_PI * 0.5)));
  EXPECT_DOUBLE_EQ(s.lr_at(35), 1e-4 + 0.5 * 9e-4 * (1 + std::cos(M_PI * 0.25)));
  EXPECT_DOUBLE_EQ(s.lr_at(110), 1e-4);  // p = 1
  EXPECT_DOUBLE_EQ(s.lr_at(500), 1e-4);  // clamped
}

TEST(Schedule, CosineWithoutRoomAfterWarmupIsMin) {
  LrSchedule s{ScheduleKind::Cosine, 1e-3, 2e-4, 10, 10, 0.2};
  EXPECT_DOUBLE_EQ(s.lr_at(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 2e-4);
}

TEST(Schedule, Constant) {
  LrSchedule s{ScheduleKind::Constant, 5e-4, 0, 4, 100, 0.2};
  EXPECT_DOUBLE_EQ(s.lr_at(1), 5e-4 * 2 / 4);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(99), 5e-4);
}

TEST(Schedule, WarmupStableDecay) {
  LrSchedule s{ScheduleKind::Wsd, 1e-3, 0.0, 10, 100, 0.2};
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(50), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(79), 1e-3);  // decay starts at step 80
  EXPECT_DOUBLE_EQ(s.lr_at(80), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(90), 0.5e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(100), 0.0);
}

TEST(Schedule, KindFromName) {
  EXPECT_EQ(schedule_kind_from_name("cosine"), ScheduleKind::Cosine);
  EXPECT_EQ(schedule_kind_from_name("wsd"), ScheduleKind::Wsd);
  EXPECT_THROW(schedule_kind_from_name("linear-ish"), ggtrain::Error);
}
