// The gated delta rule's training passes (forward with checkpoints, then
// backward) in its recurrent form and its chunked form, one after the other
// on the same inputs, at Qwen3.5-0.8B's Gated DeltaNet shape (16 key and 16
// value heads of 128):
//   bench_delta_rule [BATCH SEQ [REPEATS [THREADS]]]      default 4 512 3
// Prints each form's forward and backward milliseconds (best of REPEATS), the
// speedup and the largest difference between the two forms' outputs.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench_util.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/gated_delta_rule_chunked.h"

using namespace ggtrain;

namespace {

struct Inputs {
  std::vector<float> q, k, v, g, beta, d_o;
};

// q, k L2-normed per head and g, beta in their layer's ranges, as
// kernels/gated_deltanet.h feeds them.
Inputs make_inputs(const kernels::DeltaRuleShape& s) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  const size_t rows = size_t(s.batch * s.seq);
  Inputs in;
  for (auto* x : {&in.q, &in.k}) {
    x->resize(rows * size_t(s.n_k_heads * s.d));
    for (size_t r = 0; r < x->size(); r += size_t(s.d)) {
      float sq = 0;
      for (int64_t i = 0; i < s.d; ++i) sq += ((*x)[r + size_t(i)] = n(rng)) * (*x)[r + size_t(i)];
      for (int64_t i = 0; i < s.d; ++i) (*x)[r + size_t(i)] /= std::sqrt(sq);
    }
  }
  for (auto* x : {&in.v, &in.d_o}) {
    x->resize(rows * size_t(s.n_v_heads * s.d));
    for (auto& e : *x) e = n(rng);
  }
  in.g.resize(rows * size_t(s.n_v_heads));
  in.beta.resize(in.g.size());
  for (auto& e : in.g) e = -0.5f * u(rng);
  for (auto& e : in.beta) e = u(rng);
  return in;
}

struct Timing {
  double forward_ms = 1e30, backward_ms = 1e30;
  std::vector<float> o;
};

template <typename Fwd, typename Bwd>
Timing time_form(const kernels::DeltaRuleShape& s, const Inputs& in, int repeats, Fwd fwd, Bwd bwd) {
  Timing t;
  t.o.resize(in.v.size());
  std::vector<float> cp(size_t(s.checkpoint_floats())), dq(in.q.size()), dk(in.k.size()), dv(in.v.size()),
      dg(in.g.size()), db(in.g.size()), scratch(size_t(kernels::delta_rule_backward_scratch(s)));
  for (int r = 0; r < repeats; ++r) {
    double t0 = bench::now_s();
    fwd(t.o.data(), cp.data(), in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), s);
    double t1 = bench::now_s();
    bwd(dq.data(), dk.data(), dv.data(), dg.data(), db.data(), scratch.data(), in.d_o.data(), cp.data(), in.q.data(),
        in.k.data(), in.v.data(), in.g.data(), in.beta.data(), s);
    double t2 = bench::now_s();
    t.forward_ms = std::min(t.forward_ms, 1e3 * (t1 - t0));
    t.backward_ms = std::min(t.backward_ms, 1e3 * (t2 - t1));
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  kernels::DeltaRuleShape s;
  s.batch = argc > 2 ? std::atoll(argv[1]) : 4;
  s.seq = argc > 2 ? std::atoll(argv[2]) : 512;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  if (argc > 4) omp_set_num_threads(std::atoi(argv[4]));
  s.n_v_heads = s.n_k_heads = 16;
  s.d = 128;
  s.chunk = 64;
  const Inputs in = make_inputs(s);
  std::printf("gated delta rule, batch %lld x %lld positions, 16 heads of 128, chunks of 64, %d threads, best of %d\n",
              (long long)s.batch, (long long)s.seq, omp_get_max_threads(), repeats);
  const Timing rec = time_form(s, in, repeats, kernels::delta_rule_forward<float>, kernels::delta_rule_backward<float>);
  auto chunked_forward = [](float* o, float* cp, const float* q, const float* k, const float* v, const float* g,
                            const float* beta, const kernels::DeltaRuleShape& shape) {
    kernels::delta_rule_chunked_forward(o, cp, q, k, v, g, beta, shape);
  };
  const Timing chk = time_form(s, in, repeats, chunked_forward, kernels::delta_rule_chunked_backward<float>);
  double diff = 0, ref = 0;
  for (size_t i = 0; i < rec.o.size(); ++i) {
    diff = std::max(diff, double(std::fabs(rec.o[i] - chk.o[i])));
    ref = std::max(ref, double(std::fabs(rec.o[i])));
  }
  std::printf("%-10s forward %8.1f ms  backward %8.1f ms  total %8.1f ms\n", "recurrent", rec.forward_ms,
              rec.backward_ms, rec.forward_ms + rec.backward_ms);
  std::printf("%-10s forward %8.1f ms  backward %8.1f ms  total %8.1f ms\n", "chunked", chk.forward_ms, chk.backward_ms,
              chk.forward_ms + chk.backward_ms);
  std::printf("chunked speedup %.2fx; outputs differ by %.2e of the largest\n",
              (rec.forward_ms + rec.backward_ms) / (chk.forward_ms + chk.backward_ms), diff / ref);
  return 0;
}
