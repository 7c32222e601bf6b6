#include "train/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "util/error.h"

namespace ggtrain::train {

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// GGTRAIN_INJECT_RANK_FAILURE=R:S: rank R fails at step S (from 1) after its
// backward, while the other ranks wait in the gradient reduction: the test
// of "a failure on one rank ends every rank".
void read_injected_failure(int64_t& rank, int64_t& step) {
  const char* env = std::getenv("GGTRAIN_INJECT_RANK_FAILURE");
  if (!env || !*env) return;
  long long r = -1, s = -1;
  char tail = 0;
  if (std::sscanf(env, "%lld:%lld%c", &r, &s, &tail) != 2 || r < 0 || s < 1)
    fail("GGTRAIN_INJECT_RANK_FAILURE='{}': expected RANK:STEP such as 1:5", env);
  rank = r;
  step = s;
}

// FNV-1a over the bits, a word (two floats) at a time.
uint64_t hash_floats(const float* x, int64_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (int64_t i = 0; i < n; i += 2) {
    uint64_t w = 0;
    std::memcpy(&w, x + i, i + 1 < n ? 8 : 4);
    h = (h ^ w) * 1099511628211ULL;
  }
  return h;
}

// Sum of squares in double, in fixed blocks summed in order: the same value
// for any thread count.
double sum_of_squares(const float* g, int64_t n) {
  constexpr int64_t kBlock = 1 << 14;
  const int64_t n_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(n_blocks), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n_blocks; ++b) {
    double s = 0;
    for (int64_t i = b * kBlock, end = std::min(n, (b + 1) * kBlock); i < end; ++i) s += double(g[i]) * double(g[i]);
    partial[size_t(b)] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

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
  read_injected_failure(fail_rank_, fail_step_);
}

void DataParallel::attach(model::LlamaModel<float>& model) {
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

std::string DataParallel::describe() const {
  const double whole = 2.0 * 4.0 * double(model_->n_trainable());
  return fmt::format(
      "data parallel: {}; global micro-batch {} = {} ranks x {} windows; {}: AdamW state {} per rank "
      "(whole: {}), {} gradient buckets",
      comm_.describe(), global_batch_, size(), local_batch_,
      sharded() ? "ZeRO-1 (train.zero = 1)" : "replicated optimizer (train.zero = 0)",
      mib(sharded() ? 2.0 * 4.0 * double(plan_.shard_size) : whole), mib(whole), plan_.buckets.size());
}

void DataParallel::start(size_t i) {
  const Bucket& b = plan_.buckets[i];
  started_[i] = 1;
  float* g = model_->grads() + b.lo;
  if (sharded())
    comm_.start_reduce_scatter(g, gshard_.data() + b.shard_at, b.counts);
  else
    comm_.start_allreduce(g, b.hi - b.lo);
}

// From inside backward(): block `layer`'s gradients are final.
void DataParallel::on_block_done(int64_t layer) {
  if (!armed_) return;
  if (layer >= 0 && layer < int64_t(by_layer_.size()))
    for (size_t i : by_layer_[size_t(layer)]) start(i);
  comm_.progress();  // MPI advances non-blocking collectives only inside its calls
}

double DataParallel::finish_backward(double local_loss, int64_t step) {
  if (rank() == fail_rank_ && step == fail_step_)
    fail("step {}: injected failure on rank {} (GGTRAIN_INJECT_RANK_FAILURE)", step, rank());
  if (size() == 1) return local_loss;
  const double t0 = now_s();
  for (size_t i = 0; i < plan_.buckets.size(); ++i)  // the same order on every rank
    if (!started_[i]) start(i);
  comm_.wait_all();
  std::fill(started_.begin(), started_.end(), 0);
  armed_ = false;
  wait_s_ += now_s() - t0;
  return mean_over_ranks(local_loss);
}

void DataParallel::inject_nonfinite_gradient() {
  if (!sharded()) {
    model_->grads()[0] = INFINITY;
  } else if (root() && plan_.shard_size > 0) {  // rank 0's first slice starts at element 0
    gshard_[0] = INFINITY;
  }
}

double DataParallel::grad_norm() {
  if (!sharded()) return grad_global_norm(model_->grads(), model_->n_trainable());
  // Sum of squares of this rank's slices (padding between tensors is zero),
  // then over ranks: the same value everywhere.
  double sq = sum_of_squares(gshard_.data(), plan_.shard_size);
  comm_.allreduce_sum(&sq, 1);
  return std::sqrt(sq);
}

void DataParallel::adamw(std::vector<float>& m, std::vector<float>& v, int64_t t, double lr,
                         const AdamWConfig& cfg, float grad_scale) {
  const auto& gl = model_->grad_layout();
  if (!sharded()) {
    // Every rank holds the same reduced gradient and applies the same update.
    adamw_step(gl, model_->params(), model_->grads(), m.data(), v.data(), t, lr, cfg, grad_scale);
    return;
  }
  const size_t r = size_t(rank());
  for (const auto& b : plan_.buckets) {
    const int64_t lo = b.lo + b.displs[r];
    adamw_step_range(gl, lo, lo + b.counts[r], model_->params(), gshard_.data() + b.shard_at,
                     m.data() + b.shard_at, v.data() + b.shard_at, t, lr, cfg, grad_scale);
  }
  const double t0 = now_s();
  share_params();
  gather_s_ += now_s() - t0;
}

// ZeRO-1: every rank updated its slices; all-gather them. With nothing
// frozen the gradient index space is the parameter buffer itself; otherwise
// the slices travel through the gradient buffer (free until the next
// backward) and are copied to the parameters' own offsets.
void DataParallel::share_params() {
  const auto& gl = model_->grad_layout();
  float* params = model_->params();
  float* stage = identity_layout_ ? params : model_->grads();
  const size_t r = size_t(rank());
  if (!identity_layout_) {
    for (const auto& b : plan_.buckets) {
      const int64_t lo = b.lo + b.displs[r], hi = lo + b.counts[r];
      for (const auto& pt : gl.tensors()) {
        const int64_t a = std::max(lo, pt.offset), e = std::min(hi, pt.offset + pt.size);
        if (a < e) std::memcpy(stage + a, params + pt.source_offset + (a - pt.offset), size_t(e - a) * 4);
      }
    }
  }
  for (const auto& b : plan_.buckets) comm_.start_allgather(stage + b.lo, b.counts, b.displs);
  comm_.wait_all();
  if (!identity_layout_)
    for (const auto& pt : gl.tensors())
      std::memcpy(params + pt.source_offset, stage + pt.offset, size_t(pt.size) * 4);
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

void DataParallel::shard_moments(std::vector<float>& m, std::vector<float>& v) const {
  if (!sharded()) return;
  for (auto* whole : {&m, &v}) {
    if (int64_t(whole->size()) != model_->n_trainable())
      fail("data parallel: optimizer state has {} elements, expected {}", whole->size(), model_->n_trainable());
    std::vector<float> shard(size_t(plan_.shard_size));
    copy_to_shard(plan_, rank(), whole->data(), shard.data());
    whole->swap(shard);  // the whole vector is freed here
  }
}

void DataParallel::gather_into(const std::vector<float>& shard, std::vector<float>& full) {
  if (root()) full.assign(size_t(model_->n_trainable()), 0.f);
  for (const auto& b : plan_.buckets)
    comm_.gather(shard.data() + b.shard_at, root() ? full.data() + b.lo : nullptr, b.counts, b.displs, 0);
}

DataParallel::FullMoments::FullMoments(std::vector<float>& m, std::vector<float>& v, std::vector<float> whole_m,
                                       std::vector<float> whole_v)
    : m_(m), v_(v), shard_m_(std::move(whole_m)), shard_v_(std::move(whole_v)) {
  m_.swap(shard_m_);  // m_ now whole, shard_m_ the slices
  v_.swap(shard_v_);
}

DataParallel::FullMoments::~FullMoments() {
  m_.swap(shard_m_);
  v_.swap(shard_v_);
}

std::unique_ptr<DataParallel::FullMoments> DataParallel::prepare_checkpoint(int64_t step, std::vector<float>& m,
                                                                             std::vector<float>& v) {
  if (size() == 1) return nullptr;
  // The replicas must hold the same weights: the reductions give every rank
  // the same bits (each sum is formed in one fixed order), and this says
  // so loudly if an MPI library ever did otherwise.
  std::vector<uint64_t> all(static_cast<size_t>(size()));
  comm_.allgather(hash_floats(model_->params(), model_->layout().total()), all.data());
  for (int r = 1; r < size(); ++r)
    if (all[size_t(r)] != all[0])
      fail("step {}: the weights of rank {} differ from rank 0's; the ranks no longer train one model "
           "(an MPI reduction gave different ranks different sums)", step, r);
  if (!sharded()) return nullptr;
  std::vector<float> fm, fv;
  gather_into(m, fm);
  gather_into(v, fv);
  if (!root()) return nullptr;
  return std::make_unique<FullMoments>(m, v, std::move(fm), std::move(fv));
}

}  // namespace ggtrain::train
