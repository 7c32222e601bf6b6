// Data-parallel measurements, run under mpirun (docs/scaling.md uses them):
//   mpirun -np 2 build/bench/bench_dp                      (shared memory)
//   mpirun -np 2 --mca btl tcp,self build/bench/bench_dp   (TCP loopback)
// 1. all-reduce bandwidth (blocking MPI_Allreduce of floats, sum) by size;
// 2. overlap of the bucketed gradient all-reduce with backward on s15
//    (global batch 8 split over the ranks, 1 thread per rank): the time the
//    reduction adds after backward() when started only then, vs when each
//    block's bucket starts as that block's backward ends;
// 3. optimizer-state memory per rank (resident set growth) with
//    train.zero = 0 and 1.
// Rank 0 prints. Timings on a shared machine are noisy: take medians.
#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "model/init.h"
#include "model/transformer.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed.h"

using namespace ggtrain;

namespace {

model::Config s15() {
  model::Config c;
  c.vocab = 4096;
  c.d_model = 288;
  c.n_layers = 6;
  c.n_heads = 6;
  c.n_kv_heads = 6;
  c.d_ff = 768;
  c.ctx = 256;
  c.tied = true;
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double rss_mib() {  // current resident set (VmRSS), MiB
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

void allreduce_bandwidth(parallel::Communicator& comm) {
  const int n = comm.size();
  if (comm.root())
    std::printf("all-reduce (sum of float32, in place), %d ranks: %s\n  %10s %10s %12s %12s\n", n,
                comm.describe().c_str(), "bytes", "time", "algbw GB/s", "busbw GB/s");
  for (int64_t elems = 1 << 10; elems <= (int64_t(1) << 24); elems *= 4) {
    std::vector<float> buf(size_t(elems), 1.0f);
    const int reps = int(std::max<int64_t>(3, std::min<int64_t>(200, (int64_t(1) << 26) / elems / 4)));
    std::vector<double> t;
    comm.allreduce_sum(buf.data(), elems);  // warm up
    for (int r = 0; r < reps; ++r) {
      comm.barrier();
      const double t0 = bench::now_s();
      comm.allreduce_sum(buf.data(), elems);
      t.push_back(bench::now_s() - t0);
    }
    const double s = median(t), bytes = double(elems) * 4;
    // busbw: what each rank's link carries for a ring all-reduce, 2(n-1)/n x bytes.
    if (comm.root())
      std::printf("  %10.0f %8.3f ms %12.3f %12.3f\n", bytes, s * 1e3, bytes / s / 1e9,
                  bytes / s / 1e9 * 2.0 * (n - 1) / n);
  }
}

void overlap(parallel::Communicator& comm, int iters) {
  const auto cfg = s15();
  const int64_t B = 8, T = 256;
  parallel::DataParallel dp(comm, B, T, 0);
  model::Transformer<float> model(cfg, dp.local_batch(), T);
  model::init_params(cfg, model.layout(), model.params(), 1);
  dp.attach(model);
  std::vector<int32_t> tokens(size_t(B * T));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 2654435761u) % uint64_t(cfg.vocab));
  std::vector<double> bwd_plain, after_plain, bwd_overlap, after_overlap, compute_only;
  auto step = [&](bool overlapped, bool reduce, std::vector<double>* bwd, std::vector<double>* after) {
    comm.barrier();
    model.zero_grad();
    dp.begin_micro_batch(overlapped);
    model.forward(dp.local(tokens.data()), dp.local(tokens.data()));
    const double t0 = bench::now_s();
    model.backward(dp.loss_share());
    const double t1 = bench::now_s();
    if (reduce) dp.finish_backward();
    const double t2 = bench::now_s();
    bwd->push_back(t1 - t0);
    if (after) after->push_back(t2 - t1);
  };
  step(true, true, &bwd_overlap, &after_overlap);  // warm up
  bwd_overlap.clear(), after_overlap.clear();
  for (int i = 0; i < iters; ++i) {
    step(false, false, &compute_only, nullptr);
    step(false, true, &bwd_plain, &after_plain);
    step(true, true, &bwd_overlap, &after_overlap);
  }
  if (!comm.root()) return;
  const double grad_mb = double(model.n_trainable()) * 4 / 1e6;
  std::printf("\noverlap, s15 (%.1f MB of gradients in %zu buckets), global batch %lld = %d x %lld, %d thread(s) "
              "per rank, median of %d:\n"
              "  backward alone                          %8.1f ms\n"
              "  reduce after backward: backward %8.1f ms + wait %8.1f ms\n"
              "  reduce per block:      backward %8.1f ms + wait %8.1f ms\n"
              "  reduction time hidden behind backward: %.1f ms of %.1f ms (%.0f%%); step saves %.1f ms\n",
              grad_mb, dp.plan().buckets.size(), (long long)B, comm.size(), (long long)dp.local_batch(),
              omp_get_max_threads(), iters, median(compute_only) * 1e3, median(bwd_plain) * 1e3,
              median(after_plain) * 1e3, median(bwd_overlap) * 1e3, median(after_overlap) * 1e3,
              (median(after_plain) - median(after_overlap)) * 1e3, median(after_plain) * 1e3,
              100.0 * (median(after_plain) - median(after_overlap)) / median(after_plain),
              (median(bwd_plain) + median(after_plain) - median(bwd_overlap) - median(after_overlap)) * 1e3);
}

void optimizer_memory(parallel::Communicator& comm, const model::Config& cfg, const char* name) {
  double measured[2] = {0, 0}, planned[2] = {0, 0};
  int64_t n_params = 0;
  for (int zero : {0, 1}) {
    parallel::DataParallel dp(comm, comm.size(), 8, zero);
    model::Transformer<float> model(cfg, 1, 8);
    dp.attach(model);
    n_params = model.n_trainable();
    const double before = rss_mib();
    optim::AdamW opt(model.grad_layout(), {});  // pages touched
    dp.shard(opt);  // ZeRO-1: only this rank's slices stay
    measured[zero] = rss_mib() - before;
    planned[zero] = double(opt.state_floats()) * 4 / (1024.0 * 1024.0);
  }
  // Every rank's numbers, in rank order.
  std::vector<double> all(size_t(4 * comm.size()), 0.0);
  for (int k = 0; k < 2; ++k) {
    all[size_t(4 * comm.rank() + k)] = measured[k];
    all[size_t(4 * comm.rank() + 2 + k)] = planned[k];
  }
  comm.allreduce_sum(all.data(), int64_t(all.size()));
  if (!comm.root()) return;
  std::printf("\nAdamW state (m + v) per rank, %s, %lld trainable parameters, %d ranks:\n", name, (long long)n_params,
              comm.size());
  for (int r = 0; r < comm.size(); ++r)
    std::printf(
        "  rank %d: zero=0 %8.1f MiB resident (vectors %8.1f MiB)   zero=1 %8.1f MiB resident (vectors %8.1f MiB)\n", r,
        all[size_t(4 * r)], all[size_t(4 * r + 2)], all[size_t(4 * r + 1)], all[size_t(4 * r + 3)]);
}

}  // namespace

// bench_dp [ITERATIONS [bandwidth|overlap|memory]]: all three by default.
int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 10;
  const std::string what = argc > 2 ? argv[2] : "all";
  auto& comm = parallel::world();
  if (comm.size() < 2 && comm.root()) std::printf("(one process: run under mpirun -np 2 for these numbers)\n");
  omp_set_num_threads(1);
  if (what == "all" || what == "bandwidth") allreduce_bandwidth(comm);
  if (what == "all" || what == "overlap") overlap(comm, iters);
  if (what == "all" || what == "memory") {
    // Large blocks always from mmap and back to the kernel when freed, so
    // the resident set shows what is held (glibc otherwise raises its mmap
    // threshold after a free and keeps later blocks of up to 32 MiB on the
    // heap). Last: it would make MPI's temporary buffers fresh pages each time.
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    optimizer_memory(comm, s15(), "s15");
    auto smol = s15();
    smol.vocab = 49152, smol.d_model = 576, smol.n_layers = 30, smol.n_heads = 9, smol.n_kv_heads = 3;
    smol.d_ff = 1536, smol.ctx = 2048;
    optimizer_memory(comm, smol, "SmolLM2-135M shape");
  }
  comm.finalize();
  return 0;
}
