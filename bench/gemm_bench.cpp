// Times single-precision GEMM libraries on the shapes of an s15 training step,
// to keep the choice of GEMM library a measured one; then the per-core
// inputs of bench/results.md's estimate for other machines: oneDNN's sgemm
// and bf16 matmul on a qwen3-0.6b step's shapes, and the memory bandwidth a
// streaming kernel reaches (STREAM's triad, a[i] = b[i] + s c[i]); and
// the decoder's float prompt products through sgemm and oneDNN's f32 matmul.
// Usage: bench_gemm [THREADS]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.h"

#ifdef GGTRAIN_BENCH_OPENBLAS
#include <cblas.h>
#endif

using namespace ggtrain::bench;

namespace {

// GB/s of the triad over arrays far larger than the caches (3 x 256 MiB),
// counting 12 bytes an element as STREAM does; the fastest of 5 runs.
double triad_gbps() {
  const int64_t n = int64_t(1) << 26;
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n), 1.0f), c(static_cast<size_t>(n), 2.0f);
  double best = 1e30;
  for (int r = 0; r < 6; ++r) {
    const double t0 = now_s();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) a[size_t(i)] = b[size_t(i)] + 0.5f * c[size_t(i)];
    if (r > 0) best = std::min(best, now_s() - t0);  // the first run faults the pages in
  }
  return 12.0 * double(n) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : omp_get_max_threads();
  omp_set_num_threads(threads);
  const auto shapes = s15_gemm_shapes();
  std::printf("threads %d, mean over %zu s15 training GEMM shapes\n", threads, shapes.size());
  std::printf("oneDNN dnnl_sgemm : %7.1f GFLOP/s\n", measure_gemm_gflops(dnnl_gemm, shapes));
#ifdef GGTRAIN_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
  auto openblas = [](const GemmShape& s, const float* A, const float* B, float* C) {
    cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, int(s.M), int(s.N),
                int(s.K), 1.0f, A, int(s.ta ? s.M : s.K), B, int(s.tb ? s.K : s.N), 0.0f, C, int(s.N));
  };
  std::printf("OpenBLAS sgemm    : %7.1f GFLOP/s\n", measure_gemm_gflops(openblas, shapes));
#else
  std::printf("OpenBLAS sgemm    : not built (install libopenblas-dev and reconfigure)\n");
#endif
  // A LoRA step of the qwen3-0.6b shape at 4 x 512 (the head on 512-row chunks).
  const auto qwen3 = training_gemm_shapes(2048, 1024, 3072, 151936, 512);
  std::printf("qwen3-0.6b shapes : oneDNN sgemm %7.1f GFLOP/s, bf16 matmul %7.1f GFLOP/s\n",
              measure_gemm_gflops(dnnl_gemm, qwen3, 3),
              measure_gemm_gflops<ggtrain::kernels::bf16>(dnnl_gemm_bf16, qwen3, 3));
  // The decoder's F32 prompts: dnnl_sgemm against the matmul primitive.
  for (const int64_t rows : {16, 128, 512})
    std::printf("prompt %3ld rows   : oneDNN sgemm %7.1f GFLOP/s, f32 matmul %7.1f GFLOP/s\n", long(rows),
                measure_gemm_gflops(dnnl_gemm, prompt_gemm_shapes(rows)),
                measure_gemm_gflops(dnnl_matmul, prompt_gemm_shapes(rows)));
  std::printf("memory triad      : %7.1f GB/s\n", triad_gbps());
  return 0;
}
