// Training throughput of the s15 config (d_model 288, 6 layers, 6 heads,
// d_ff 768, vocab 4096, seq 256, batch 8, tied): tokens/s, model FLOPs/token
// (6N + 12*L*d*T), MFU against the GEMM peak measured in this same run, and
// peak RSS, for each thread count given (default: 1 and 2).
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.h"
#include "model/init.h"
#include "model/llama.h"
#include "train/adamw.h"
#include "util/rng.h"

using namespace ggtrain;

namespace {

model::LlamaConfig s15() {
  model::LlamaConfig c;
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

struct Result {
  double tokens_per_s, seconds_per_step, loss;
};

Result run_training(const model::LlamaConfig& c, int64_t B, int64_t T, int warmup, int steps) {
  model::LlamaModel<float> m(c, B, T);
  model::init_params(c, m.layout(), m.params(), 1);
  const int64_t n = m.n_params();
  std::vector<float> mom(size_t(n), 0.f), var(size_t(n), 0.f);
  Rng rng(7);
  std::vector<int32_t> tokens(size_t(B * T + 1));
  double t0 = 0, loss = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) t0 = bench::now_s();
    for (auto& t : tokens) t = int32_t(rng.next_u64() % uint64_t(c.vocab));
    loss = m.forward(tokens.data(), tokens.data() + 1);
    m.zero_grad();
    m.backward();
    float scale = train::clip_scale(train::grad_global_norm(m.grads(), n), 1.0);
    train::adamw_step(m.layout(), m.params(), m.grads(), mom.data(), var.data(), s + 1, 3e-4, {},
                      scale);
  }
  const double dt = bench::now_s() - t0;
  return {double(B * T * steps) / dt, dt / steps, loss};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts;
  for (int i = 1; i < argc; ++i) thread_counts.push_back(std::atoi(argv[i]));
  if (thread_counts.empty()) thread_counts = {1, 2};
  const auto c = s15();
  const int64_t B = 8, T = 256;
  const double fpt = c.flops_per_token(T);
  std::printf("s15: %lld matmul params, %.1f MFLOP/token (6N + 12*L*d*T), batch %lld x %lld\n",
              (long long)c.matmul_params(), fpt / 1e6, (long long)B, (long long)T);
  for (int threads : thread_counts) {
    omp_set_num_threads(threads);
    const double peak = bench::measure_gemm_gflops(bench::dnnl_gemm, bench::s15_gemm_shapes());
    const Result r = run_training(c, B, T, 2, 8);
    const double achieved = fpt * r.tokens_per_s / 1e9;
    std::printf("threads %d: %8.0f tokens/s  %.3f s/step  %6.1f GFLOP/s  MFU %5.1f%% of %.0f "
                "GFLOP/s sgemm peak  loss %.3f  peak RSS %.0f MiB\n",
                threads, r.tokens_per_s, r.seconds_per_step, achieved, 100.0 * achieved / peak,
                peak, r.loss, bench::peak_rss_mib());
  }
  return 0;
}
