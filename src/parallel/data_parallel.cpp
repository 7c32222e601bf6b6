#include "parallel/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "util/clock.h"
#include "util/error.h"
#include "util/hash.h"

namespace ggtrain::parallel {

namespace {

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0)); }

}  // namespace

DataParallel::DataParallel(Communicator& comm, int64_t global_batch, int64_t seq_len, int64_t zero)
    : comm_(comm), zero_(zero), global_batch_(global_batch) {
  if (global_batch % comm_.size() != 0)
    fail("train.batch = {} cannot be split over {} ranks: it is the global micro-batch, each rank "
         "takes train.batch / ranks windows, so it must be a multiple of the number of ranks",
         global_batch, comm_.size());
  local_batch_ = global_batch / comm_.size();
  first_token_ = int64_t(comm_.rank()) * local_batch_ * seq_len;
}

void DataParallel::attach(model::Transformer<float>& model) {
  model_ = &model;
  const auto& gl = model.grad_layout();
  plan_ = plan_buckets(gl, size(), rank());
  int64_t n_layers = 0;
  for (const auto& b : plan_.buckets) n_layers = std::max(n_layers, b.layer + 1);
  by_layer_.assign(size_t(n_layers), {});
  for (size_t i = 0; i < plan_.buckets.size(); ++i)
    if (plan_.buckets[i].layer >= 0) by_layer_[size_t(plan_.buckets[i].layer)].push_back(i);
  started_.assign(plan_.buckets.size(), 0);
  for (const auto& t : gl.tensors()) identity_layout_ = identity_layout_ && t.source_offset == t.offset;
  if (sharded()) gshard_.assign(size_t(std::max<int64_t>(plan_.shard_size, 1)), 0.f);
  if (size() > 1) model.on_layer_grads = [this](int64_t layer) { on_block_done(layer); };
}

std::string DataParallel::describe(int64_t adam_state_floats) const {
  const double whole = 2.0 * 4.0 * double(model_->n_trainable());
  return fmt::format("data parallel: {}; global micro-batch {} = {} ranks x {} windows; {}: AdamW state {} per rank "
                     "(whole: {}), {} gradient buckets",
                     comm_.describe(), global_batch_, size(), local_batch_,
                     sharded() ? "ZeRO-1 (train.zero = 1)" : "replicated optimizer (train.zero = 0)",
                     mib(4.0 * double(adam_state_floats)), mib(whole), plan_.buckets.size());
}

void DataParallel::start(size_t i) {
  const Bucket& b = plan_.buckets[i];
  started_[i] = 1;
  float* g = model_->grads() + b.lo;
  if (sharded()) comm_.start_reduce_scatter(g, gshard_.data() + b.shard_at, b.counts);
  else comm_.start_allreduce(g, b.hi - b.lo);
}

// From inside backward(): block `layer`'s gradients are final.
void DataParallel::on_block_done(int64_t layer) {
  if (!armed_) return;
  if (layer >= 0 && layer < int64_t(by_layer_.size()))
    for (size_t i : by_layer_[size_t(layer)]) start(i);
  comm_.progress();  // MPI advances non-blocking collectives only inside its calls
}

void DataParallel::finish_backward() {
  const double t0 = now_seconds();
  for (size_t i = 0; i < plan_.buckets.size(); ++i)  // the same order on every rank
    if (!started_[i]) start(i);
  comm_.wait_all();
  std::fill(started_.begin(), started_.end(), 0);
  armed_ = false;
  wait_s_ += now_seconds() - t0;
}

DataParallel::Reduced DataParallel::reduce(double local_loss, const std::function<void()>& before_norm) {
  Reduced r;
  if (size() > 1) finish_backward();
  r.loss = sum_over_ranks(local_loss);
  if (before_norm) before_norm();
  r.grad_norm = grad_norm();
  return r;
}

void DataParallel::inject_nonfinite_gradient() {
  if (!sharded()) {
    model_->grads()[0] = INFINITY;
  } else if (root() && plan_.shard_size > 0) {  // rank 0's first slice starts at element 0
    gshard_[0] = INFINITY;
  }
}

double DataParallel::grad_norm() {
  if (!sharded()) return optim::grad_global_norm(model_->grads(), model_->n_trainable());
  // Sum of squares of this rank's slices (padding between tensors is zero),
  // then over ranks: the same value everywhere.
  double sq = optim::grad_sum_of_squares(gshard_.data(), plan_.shard_size);
  comm_.allreduce_sum(&sq, 1);
  return std::sqrt(sq);
}

void DataParallel::update(optim::AdamW& opt, double lr, float grad_scale) {
  // Without ZeRO every rank holds the same reduced gradient and applies the
  // same update.
  opt.step(model_->params(), sharded() ? gshard_.data() : model_->grads(), lr, grad_scale);
  if (!sharded()) return;
  const double t0 = now_seconds();
  share_params();
  gather_s_ += now_seconds() - t0;
}

// ZeRO-1: every rank updated its slices; all-gather them. With nothing
// frozen the gradient index space is the parameter buffer itself; otherwise
// the slices travel through the gradient buffer (free until the next
// backward) and are copied to the parameters' own offsets.
void DataParallel::share_params() {
  const auto& gl = model_->grad_layout();
  float* params = model_->params();
  float* stage = identity_layout_ ? params : model_->grads();
  if (!identity_layout_) {
    for (const auto& [lo, hi, at] : rank_slices(plan_, rank())) {
      for (const auto& pt : gl.tensors()) {
        const int64_t a = std::max(lo, pt.offset), e = std::min(hi, pt.offset + pt.size);
        if (a < e) std::memcpy(stage + a, params + pt.source_offset + (a - pt.offset), size_t(e - a) * 4);
      }
    }
  }
  for (const auto& b : plan_.buckets) comm_.start_allgather(stage + b.lo, b.counts, b.displs);
  comm_.wait_all();
  if (!identity_layout_)
    for (const auto& pt : gl.tensors()) std::memcpy(params + pt.source_offset, stage + pt.offset, size_t(pt.size) * 4);
}

double DataParallel::mean_over_ranks(double x) {
  if (size() == 1) return x;
  comm_.allreduce_sum(&x, 1);
  return x / double(size());
}

int64_t DataParallel::max_over_ranks(int64_t x) {
  if (size() > 1) comm_.allreduce_max(&x, 1);
  return x;
}

void DataParallel::shard(optim::AdamW& opt) const {
  if (!sharded()) return;
  if (opt.state_floats() != 2 * model_->n_trainable())
    fail("data parallel: optimizer state has {} floats, expected {}", opt.state_floats(), 2 * model_->n_trainable());
  opt.keep_only(rank_slices(plan_, rank()));
}

void DataParallel::gather_into(const std::vector<float>& shard, std::vector<float>& full) {
  if (root()) full.assign(size_t(model_->n_trainable()), 0.f);
  for (const auto& b : plan_.buckets)
    comm_.gather(shard.data() + b.shard_at, root() ? full.data() + b.lo : nullptr, b.counts, b.displs, 0);
}

DataParallel::WholeState::WholeState(optim::AdamW& opt, optim::AdamW::Moments whole)
    : opt_(opt), slices_(std::move(whole)) {
  std::swap(opt_.moments(), slices_);  // the optimizer's state now whole, slices_ its slices
}

DataParallel::WholeState::~WholeState() { std::swap(opt_.moments(), slices_); }

std::unique_ptr<DataParallel::WholeState> DataParallel::prepare_checkpoint(int64_t step, optim::AdamW& opt) {
  if (size() == 1) return nullptr;
  // The replicas must hold the same weights: the reductions give every rank
  // the same bits (each sum is formed in one fixed order), and this says
  // so loudly if an MPI library ever did otherwise.
  std::vector<uint64_t> all(static_cast<size_t>(size()));
  comm_.allgather(fnv1a_words(model_->params(), size_t(model_->layout().total()) * sizeof(float)), all.data());
  for (int r = 1; r < size(); ++r)
    if (all[size_t(r)] != all[0])
      fail("step {}: the weights of rank {} differ from rank 0's; the ranks no longer train one model "
           "(an MPI reduction gave different ranks different sums)",
           step, r);
  if (!sharded()) return nullptr;
  optim::AdamW::Moments whole;
  gather_into(opt.moments().m, whole.m);
  gather_into(opt.moments().v, whole.v);
  if (!root()) return nullptr;
  return std::make_unique<WholeState>(opt, std::move(whole));
}

}  // namespace ggtrain::parallel
