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
//   GGTRAIN_INJECT_BROKEN_RESUME=PIECE  a --resume loses one piece of its
//                                    state on purpose: data (the data
//                                    position), adam_m, adam_v (a moment),
//                                    master_bf16 (the weights kept only to
//                                    bf16), so a test proves that the
//                                    exact-resume check notices each loss
// A malformed value is an error naming the variable. reduce_step() below is
// where they take effect.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "corpus/mixture_loader.h"
#include "dist/data_parallel.h"

namespace ggtrain::train {

struct InjectedFaults {
  std::set<int64_t> nan_steps;
  bool nan_into_grad = false;
  int64_t failing_rank = -1, failing_step = -1;
  std::string broken_resume;  // "": none

  bool nan_loss_at(int64_t step) const { return !nan_into_grad && nan_steps.count(step) > 0; }
  bool nan_grad_at(int64_t step) const { return nan_into_grad && nan_steps.count(step) > 0; }
  bool rank_fails_at(int64_t rank, int64_t step) const { return rank == failing_rank && step == failing_step; }
};

InjectedFaults injected_faults();

// What a resumed run restored, less the piece faults.broken_resume names.
void break_resume(const InjectedFaults& faults, corpus::MixtureState& loader, std::vector<float>& adam_m,
                  std::vector<float>& adam_v, float* params, int64_t n_params);

// The step's gradients summed over the ranks, their shares of the loss
// summed (the step's mean loss) and the global gradient norm, with whatever
// `faults` a test injected at `step` (none in a user's run): the trainer's
// one call between its backward passes and the optimizer, so the faults
// sit around DataParallel rather than in the training step.
struct ReducedStep {
  double loss = 0, grad_norm = 0;
};
ReducedStep reduce_step(dist::DataParallel& dp, const InjectedFaults& faults, int64_t step, double local_loss);

}  // namespace ggtrain::train
