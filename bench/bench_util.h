#pragma once
// Shared helpers for the benchmarks: wall clock, peak RSS, GEMM peak.
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/gemm.h"

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

// The GEMMs one s15 training step runs (forward x W^T, dX = dY W, dW = dY^T X).
inline std::vector<GemmShape> s15_gemm_shapes() {
  const int64_t BT = 2048, C = 288, F = 768, V = 4096;
  return {{BT, C, C, false, true},  {BT, F, C, false, true}, {BT, C, F, false, true},
          {BT, V, C, false, true},  {BT, C, V, false, false}, {V, C, BT, true, false},
          {F, C, BT, true, false},  {BT, F, C, false, false}, {C, F, BT, true, false}};
}

// Mean GFLOP/s of `fn` (a sgemm with the given shape) over the shapes.
template <typename Fn>
double measure_gemm_gflops(Fn fn, const std::vector<GemmShape>& shapes, int reps = 5) {
  double total = 0;
  for (const auto& s : shapes) {
    std::vector<float> A(size_t(s.M * s.K), 0.01f), B(size_t(s.K * s.N), 0.02f),
        C(size_t(s.M * s.N), 0.f);
    fn(s, A.data(), B.data(), C.data());  // warm up
    double t0 = now_s();
    for (int r = 0; r < reps; ++r) fn(s, A.data(), B.data(), C.data());
    double dt = (now_s() - t0) / reps;
    total += 2.0 * double(s.M * s.N * s.K) / dt / 1e9;
  }
  return total / double(shapes.size());
}

inline void dnnl_gemm(const GemmShape& s, const float* A, const float* B, float* C) {
  kernels::gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A, s.ta ? s.M : s.K, B, s.tb ? s.K : s.N, 0.0f,
                C, s.N);
}

}  // namespace ggtrain::bench
