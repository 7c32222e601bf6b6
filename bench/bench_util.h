#pragma once
// Shared helpers for the benchmarks: wall clock, peak RSS, GEMM peak.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"

namespace ggtrain::bench {

inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

struct GemmShape {
  int64_t M, N, K;
  bool ta, tb;
};

// The GEMMs of one training step of a model with these widths on BT tokens
// (forward x W^T, dX = dY W, dW = dY^T X); the head's run on chunks of R rows.
inline std::vector<GemmShape> training_gemm_shapes(int64_t BT, int64_t C, int64_t F, int64_t V, int64_t R) {
  return {{BT, C, C, false, true}, {BT, F, C, false, true},  {BT, C, F, false, true},
          {R, V, C, false, true},  {R, C, V, false, false},  {V, C, R, true, false},
          {F, C, BT, true, false}, {BT, F, C, false, false}, {C, F, BT, true, false}};
}

// The shapes bench_gemm has always timed (the head on all 2048 rows).
inline std::vector<GemmShape> s15_gemm_shapes() { return training_gemm_shapes(2048, 288, 768, 4096, 2048); }

// Mean GFLOP/s of `fn` (a GEMM with the given shape on inputs of element
// type E) over the shapes, each timed by its fastest of `reps` runs: on a
// shared machine the mean measured the other processes as much as the GEMM.
template <typename E = float, typename Fn>
double measure_gemm_gflops(Fn fn, const std::vector<GemmShape>& shapes, int reps = 7) {
  double total = 0;
  for (const auto& s : shapes) {
    std::vector<E> A(size_t(s.M * s.K), E(0)), B(size_t(s.K * s.N), E(0));
    std::vector<float> C(size_t(s.M * s.N), 0.f);
    fn(s, A.data(), B.data(), C.data());  // warm up
    const double flops = 2.0 * double(s.M * s.N * s.K);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      fn(s, A.data(), B.data(), C.data());
      best = std::min(best, now_s() - t0);
    }
    total += flops / best / 1e9;
  }
  return total / double(shapes.size());
}

inline void dnnl_gemm(const GemmShape& s, const float* A, const float* B, float* C) {
  kernels::gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A, s.ta ? s.M : s.K, B, s.tb ? s.K : s.N, 0.0f, C, s.N);
}

inline void dnnl_matmul(const GemmShape& s, const float* A, const float* B, float* C) {
  kernels::gemm_matmul(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A, s.ta ? s.M : s.K, B, s.tb ? s.K : s.N, 0.0f, C, s.N);
}

// The products of a qwen3.5-0.8b prompt of `rows` tokens in the decoder,
// x W^T: DeltaNet's qkv and z, the output, gate and down, a 32000-row head.
inline std::vector<GemmShape> prompt_gemm_shapes(int64_t rows) {
  return {{rows, 6144, 1024, false, true}, {rows, 2048, 1024, false, true}, {rows, 1024, 2048, false, true},
          {rows, 3584, 1024, false, true}, {rows, 1024, 3584, false, true}, {rows, 32000, 1024, false, true}};
}

inline void dnnl_gemm_bf16(const GemmShape& s, const kernels::bf16* A, const kernels::bf16* B, float* C) {
  kernels::gemm_bf16(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A, s.ta ? s.M : s.K, B, s.tb ? s.K : s.N, 0.0f, C, s.N);
}

}  // namespace ggtrain::bench
