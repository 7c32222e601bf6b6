#pragma once
// How data-parallel training cuts the gradient buffer: into buckets, each
// reduced as soon as its gradients are final (a transformer block's tensors
// when that block's backward finishes), and each bucket into one slice per
// rank: under ZeRO-1 (train.zero = 1) rank r keeps the AdamW moments of, and
// updates, slice r of every bucket only.
#include <cstdint>
#include <string>
#include <vector>

#include "model/params.h"
#include "optim/adamw.h"

namespace ggtrain::parallel {

struct Bucket {
  int64_t lo = 0, hi = 0;  // range of the gradient buffer (grad_layout indices)
  int64_t layer = -1;  // blk.<layer> tensors; -1: reduced after backward() returns
  // Per rank: slice r is [lo + displs[r], lo + displs[r] + counts[r]).
  std::vector<int> counts, displs;
  int64_t shard_at = 0;  // where this rank's slice starts in its shard buffers
};

struct BucketPlan {
  std::vector<Bucket> buckets;
  int64_t shard_size = 0;  // elements of this rank's slices, all buckets together
};

// Buckets in layout order: maximal runs of consecutive tensors of the same
// block ("blk.N."), other tensors (embeddings, output) by themselves as runs,
// each at most max_elements (16 MiB of floats: MPI's temporary buffers for
// it stay on the reused heap, parallel/distributed_mpi.cpp). Every tensor lies in
// exactly one bucket; every non-empty slice starts on a multiple of 16
// floats (64 bytes), like the tensors.
BucketPlan plan_buckets(const model::ParamLayout& grad_layout, int n_ranks, int rank,
                        int64_t max_elements = int64_t(1) << 22);

// This rank's slices of every bucket, as the optimizer keeps them (ZeRO-1):
// [lo + displs[rank], + counts[rank]) at the bucket's shard_at.
std::vector<optim::AdamW::Slice> rank_slices(const BucketPlan& plan, int rank);

// full (the whole gradient index space) -> this rank's slices, packed.
void copy_to_shard(const BucketPlan& plan, int rank, const float* full, float* shard);

}  // namespace ggtrain::parallel
