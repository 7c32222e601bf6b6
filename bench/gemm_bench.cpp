// Times single-precision GEMM libraries on the shapes of an s15 training step,
// to keep the choice of GEMM library a measured one.
#include <omp.h>

#include <cstdio>
#include <cstdlib>

#include "bench_util.h"

#ifdef GGTRAIN_BENCH_OPENBLAS
#include <cblas.h>
#endif

using namespace ggtrain::bench;

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
  return 0;
}
