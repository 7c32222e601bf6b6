#pragma once
// Row-major GEMM: C[M,N] = alpha * op(A) * op(B) + beta * C.
// float goes to oneDNN's dnnl_sgemm (the fastest of those compared in bench/gemm);
// double is a plain loop used only by the double-precision gradient checks.
#include <cstdint>

namespace ggtrain::kernels {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// The float product through oneDNN's matmul primitive (its brgemm kernels;
// one primitive per shape, made on first use and kept, beside gemm_bf16's):
// x W^T at 16-512 rows ran 1.2-5x dnnl_sgemm's speed on the shapes of a
// qwen3.5-0.8b prompt (Zen 4, 2 threads), the same at 2048 rows, slower
// below 16. beta 0 or 1 (else it goes to gemm).
void gemm_matmul(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// A linear layer y = x W^T, W row-major [n_out, n_in] like nn.Linear and ggml.
// out[M, n_out] = inp[M, n_in] * W^T
template <typename T>
void linear_forward(T* out, const T* inp, const T* w, int64_t M, int64_t n_in, int64_t n_out) {
  gemm(false, true, M, n_out, n_in, T(1), inp, n_in, w, n_in, T(0), out, n_out);
}

// dinp[M, n_in] (= or +=, per accumulate_dinp) dout * W; dw[n_out, n_in] += dout^T * inp.
// dinp may be null (e.g. nothing upstream needs it).
template <typename T>
void linear_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, int64_t M, int64_t n_in, int64_t n_out,
                     bool accumulate_dinp) {
  if (dinp) gemm(false, false, M, n_in, n_out, T(1), dout, n_out, w, n_in, accumulate_dinp ? T(1) : T(0), dinp, n_in);
  if (dw) gemm(true, false, n_out, n_in, M, T(1), dout, n_out, inp, n_in, T(1), dw, n_in);
}

}  // namespace ggtrain::kernels
