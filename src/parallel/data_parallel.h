#pragma once
// Data-parallel training: N ranks (parallel/distributed.h) follow the
// trajectory of one process at the same global batch.
//
// train.batch stays the global micro-batch: every rank draws the same
// windows from its own copy of the loader (so the loader state, saved with
// checkpoints, is identical everywhere), and rank r computes windows
// [r B/N, (r+1) B/N) of each micro-batch. Each rank's backward scales its
// loss by 1/N, so the sum over ranks is the gradient of the global mean loss
// that one process computes over all B windows. The global batch is
// N x (B/N) x grad_accum = train.batch x grad_accum, whatever N is.
//
// Why the trajectory equals one process's only up to rounding: the per-window
// arithmetic is the same, but the sum over the batch is formed differently:
// each rank's GEMMs sum over its own windows, MPI adds the N partial sums,
// the loss is a mean of per-rank means, and GEMM kernels may block the
// summed dimension differently for a smaller batch. Float addition is not
// associative, so these differ from one process's sums in the last bits,
// nothing else. With the same N the order is fixed, so a resumed run is
// bit-identical to an uninterrupted one.
//
// Gradients are reduced in buckets (parallel/zero.h): a block's bucket starts
// (non-blocking) from backward() as soon as that block's gradients are
// final, on the last micro-batch of a step, so the reduction overlaps the
// backward of the blocks below it.
//
// train.zero = 1 (ZeRO-1): gradients are reduce-scattered instead, rank r
// keeps the AdamW moments of and updates only its slice of each bucket, and
// the updated parameters are all-gathered. The optimizer state per rank is
// ~1/N of the whole. Checkpoints hold the whole state (gathered on rank 0),
// so a run resumes with any N and either zero setting.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/transformer.h"
#include "optim/adamw.h"
#include "parallel/distributed.h"
#include "parallel/zero.h"

namespace ggtrain::parallel {

class DataParallel {
 public:
  // global_batch (train.batch) must be a multiple of the number of ranks.
  DataParallel(Communicator& comm, int64_t global_batch, int64_t seq_len, int64_t zero);
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  bool root() const { return comm_.root(); }
  void barrier() { comm_.barrier(); }
  bool sharded() const { return zero_ && size() > 1; }
  int64_t local_batch() const { return local_batch_; }
  // Plans buckets and shards for the model, hooks its backward().
  void attach(model::Transformer<float>& model);
  // One line for the log: ranks, batch split, optimizer memory.
  // `adam_state_floats`: what this rank holds of AdamW's m and v (after
  // shard_moments), the number the line reports per rank.
  std::string describe(int64_t adam_state_floats) const;

  // This rank's first row (window) within a global micro-batch.
  int64_t first_row() const { return int64_t(rank()) * local_batch_; }
  // This rank's windows within a global micro-batch of tokens [B, T].
  const int32_t* local(const int32_t* batch_tokens) const { return batch_tokens + first_token_; }
  int32_t* local(int32_t* batch_tokens) const { return batch_tokens + first_token_; }
  // Scale for this rank's loss: its share of the global mean.
  float loss_share() const { return 1.0f / float(size()); }

  // Before each micro-batch's forward: `last` arms the per-block reduction.
  void begin_micro_batch(bool last) { armed_ = last && size() > 1; }
  // After a step's last backward: every gradient summed over the ranks
  // (ZeRO-1: this rank's slices of the sum), the ranks' shares of the loss
  // summed (the step's loss), and the summed gradient's global norm (the
  // same value on every rank). `before_norm`, when set, runs between the
  // sum and the norm: a test's fault injection.
  // finish_backward() is its first part: every bucket's sum complete.
  void finish_backward();
  struct Reduced {
    double loss = 0, grad_norm = 0;
  };
  Reduced reduce(double local_loss, const std::function<void()>& before_norm = nullptr);
  // Test hook (GGTRAIN_INJECT_NAN_INTO=grad): the first trainable gradient
  // element becomes +Inf on the rank that holds it after the reduction.
  void inject_nonfinite_gradient();
  // The optimizer's update of this rank's part (all of it without ZeRO),
  // then the updated parameters are shared.
  void update(optim::AdamW& opt, double lr, float grad_scale);

  double mean_over_ranks(double x);
  // The sum over the ranks (collective): the mean times the rank count,
  // x itself in one process.
  double sum_over_ranks(double x) { return mean_over_ranks(x) * double(size()); }
  int64_t max_over_ranks(int64_t x);

  // ZeRO-1: the optimizer keeps only this rank's slices of its state.
  void shard(optim::AdamW& opt) const;
  // For a checkpoint (collective): checks that every rank holds the same
  // weights, and with ZeRO-1 gathers the optimizer's whole state into rank
  // 0's until the returned guard is destroyed (then rank 0 keeps its slices
  // again).
  class WholeState {
   public:
    WholeState(optim::AdamW& opt, optim::AdamW::Moments whole);
    ~WholeState();
    WholeState(const WholeState&) = delete;
    WholeState& operator=(const WholeState&) = delete;

   private:
    optim::AdamW& opt_;
    optim::AdamW::Moments slices_;
  };
  std::unique_ptr<WholeState> prepare_checkpoint(int64_t step, optim::AdamW& opt);

  // Seconds spent waiting for gradient reductions after backward() returned
  // (the part not hidden behind it), and in the ZeRO-1 parameter gather.
  double wait_seconds() const { return wait_s_; }
  double gather_seconds() const { return gather_s_; }
  const BucketPlan& plan() const { return plan_; }

 private:
  double grad_norm();
  void on_block_done(int64_t layer);
  void start(size_t bucket);
  void share_params();
  void gather_into(const std::vector<float>& shard, std::vector<float>& full);

  Communicator& comm_;
  int64_t zero_, global_batch_, local_batch_, first_token_;
  model::Transformer<float>* model_ = nullptr;
  BucketPlan plan_;
  std::vector<std::vector<size_t>> by_layer_;  // bucket indices of each block
  std::vector<char> started_;
  std::vector<float> gshard_;  // ZeRO-1: this rank's reduced gradient slices
  bool armed_ = false, identity_layout_ = true;
  double wait_s_ = 0, gather_s_ = 0;
};

}  // namespace ggtrain::parallel
