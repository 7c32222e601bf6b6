// train/best_metric: what checkpoint.keep_best may name and which value of
// each metric is the better one.
#include <gtest/gtest.h>

#include <cmath>

#include "train/best_metric.h"
#include "util/error.h"

using namespace ggtrain;

TEST(BestMetric, MetricsAndTheirDirection) {
  for (const char* ok : {"", "val_loss", "bpb", "task:verses.hellaswag"}) EXPECT_NO_THROW(train::check_keep_best(ok));
  for (const char* bad : {"loss", "task:", "val_bpb"}) EXPECT_THROW(train::check_keep_best(bad), Error);
  EXPECT_TRUE(train::better_on("val_loss", 2.0, 3.0));
  EXPECT_FALSE(train::better_on("val_loss", 3.0, 3.0));  // a tie keeps the earlier step
  EXPECT_TRUE(train::better_on("bpb", 1.0, NAN));  // the first value
  EXPECT_FALSE(train::better_on("bpb", NAN, 1.0));
  EXPECT_TRUE(train::better_on("task:t", 0.5, 0.25));  // accuracies: higher
  EXPECT_FALSE(train::better_on("task:t", 0.25, 0.5));
  EXPECT_TRUE(train::names_task("task:t.jsonl", "/data/tasks/t.jsonl"));
  EXPECT_TRUE(train::names_task("task:/data/tasks/t.jsonl", "/data/tasks/t.jsonl"));
  EXPECT_FALSE(train::names_task("task:u.jsonl", "/data/tasks/t.jsonl"));
}
