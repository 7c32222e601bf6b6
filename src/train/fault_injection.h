#pragma once
// Faults the tests inject into a training run through the environment, read
// once when the run starts (injected_faults() is the one entry point; users
// never set these):
//   GGTRAIN_INJECT_NAN_AT_STEP=LIST  steps (from 1: "5", "3,4,7-9") whose
//                                    loss becomes NaN, or with
//   GGTRAIN_INJECT_NAN_INTO=grad     one gradient +Inf (default: loss)
//   GGTRAIN_INJECT_RANK_FAILURE=R:S  rank R fails at step S after its
//                                    backward, while the other ranks wait in
//                                    the gradient reduction (a failure on one
//                                    rank must end every rank)
// A malformed value is an error naming the variable.
#include <cstdint>
#include <set>

namespace ggtrain::train {

struct InjectedFaults {
  std::set<int64_t> nan_steps;
  bool nan_into_grad = false;
  int64_t failing_rank = -1, failing_step = -1;

  bool nan_loss_at(int64_t step) const { return !nan_into_grad && nan_steps.count(step) > 0; }
  bool nan_grad_at(int64_t step) const { return nan_into_grad && nan_steps.count(step) > 0; }
  bool rank_fails_at(int64_t rank, int64_t step) const { return rank == failing_rank && step == failing_step; }
};

InjectedFaults injected_faults();

}  // namespace ggtrain::train
