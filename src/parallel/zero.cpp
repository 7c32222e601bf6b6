#include "parallel/zero.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ggtrain::parallel {

namespace {

// Slice boundaries of [0, len) for n ranks, on 16-float (64-byte) multiples
// so each slice keeps the buffer's vector alignment.
void cut_slices(Bucket& b, int n_ranks) {
  const int64_t len = b.hi - b.lo;
  b.counts.assign(size_t(n_ranks), 0);
  b.displs.assign(size_t(n_ranks), 0);
  int64_t prev = 0;
  for (int r = 0; r < n_ranks; ++r) {
    const int64_t end = r + 1 == n_ranks ? len : std::min(len, (len * (r + 1) / n_ranks + 15) / 16 * 16);
    b.displs[size_t(r)] = int(prev);
    b.counts[size_t(r)] = int(std::max<int64_t>(0, end - prev));
    prev = std::max(prev, end);
  }
}

}  // namespace

BucketPlan plan_buckets(const model::ParamLayout& grad_layout, int n_ranks, int rank, int64_t max_elements) {
  BucketPlan plan;
  max_elements = std::max<int64_t>(16, max_elements / 16 * 16);  // cuts keep 64-byte alignment
  const auto& ts = grad_layout.tensors();
  for (size_t i = 0; i < ts.size();) {
    // A run of tensors of one block (or one non-block tensor), cut at max_elements.
    const int64_t layer = model::block_of(ts[i].name);
    size_t j = i + 1;
    while (layer >= 0 && j < ts.size() && model::block_of(ts[j].name) == layer) ++j;
    const int64_t lo = ts[i].offset, hi = ts[j - 1].offset + ts[j - 1].size;
    for (int64_t a = lo; a < hi; a += max_elements) {
      Bucket b;
      b.lo = a;
      b.hi = std::min(hi, a + max_elements);
      b.layer = layer;
      cut_slices(b, n_ranks);
      b.shard_at = plan.shard_size;
      plan.shard_size += b.counts[size_t(rank)];
      plan.buckets.push_back(std::move(b));
    }
    i = j;
  }
  return plan;
}

std::vector<optim::AdamW::Slice> rank_slices(const BucketPlan& plan, int rank) {
  std::vector<optim::AdamW::Slice> slices;
  for (const auto& b : plan.buckets) {
    const int64_t lo = b.lo + b.displs[size_t(rank)];
    slices.push_back({lo, lo + b.counts[size_t(rank)], b.shard_at});
  }
  return slices;
}

void copy_to_shard(const BucketPlan& plan, int rank, const float* full, float* shard) {
  for (const auto& b : plan.buckets)
    std::memcpy(shard + b.shard_at, full + b.lo + b.displs[size_t(rank)],
                size_t(b.counts[size_t(rank)]) * sizeof(float));
}

}  // namespace ggtrain::parallel
