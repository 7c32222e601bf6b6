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
//                                    adam_step (AdamW's update count),
//                                    schedule (the learning rate restarts
//                                    its schedule), lora (the adapter, as
//                                    a fresh one), master_bf16 (the weights
//                                    kept only to bf16), so a test proves
//                                    that the exact-resume check notices
//                                    each loss
// A malformed value is an error naming the variable. reduce_step() and
// break_resume() below are where they take effect.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "corpus/mixture_loader.h"
#include "model/params.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"

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

// What a resumed run restored, that break_resume may take a piece of.
struct ResumedState {
  corpus::MixtureState& loader;
  optim::AdamW& optimizer;
  const model::ParamLayout& layout;  // of params
  float* params;
  int64_t step;  // the step the run resumes at
  int64_t& schedule_origin;  // the step the learning-rate schedule counts from
};

// What a resumed run restored, less the piece faults.broken_resume names.
void break_resume(const InjectedFaults& faults, const ResumedState& s);

// The step's gradients summed over the ranks, their shares of the loss
// summed (the step's mean loss) and the global gradient norm
// (DataParallel::reduce), with whatever `faults` a test injected at `step`
// around it (none in a user's run).
parallel::DataParallel::Reduced reduce_step(parallel::DataParallel& dp, const InjectedFaults& faults, int64_t step,
                                            double local_loss);

}  // namespace ggtrain::train
