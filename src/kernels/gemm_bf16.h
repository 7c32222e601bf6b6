#pragma once
// Row-major GEMM on bf16 inputs with float output and accumulation:
// C[M,N] = alpha * op(A) * op(B) + beta * C, beta 0 or 1. oneDNN's matmul
// primitive (its AVX512_BF16 brgemm kernels where the CPU has them); one
// primitive per shape, created on first use and kept.
#include <cstdint>

#include "kernels/bf16.h"

namespace ggtrain::kernels {

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
               const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Whether oneDNN runs bf16 matmuls with native instructions here (else it
// emulates them, slower than float).
bool bf16_gemm_is_native();

// y[M, n_out] = x W^T, dinp/dw as linear_backward (gemm.h), all on bf16 inputs.
inline void linear_forward(float* out, const bf16* inp, const bf16* w, int64_t M, int64_t n_in, int64_t n_out) {
  gemm_bf16(false, true, M, n_out, n_in, 1.f, inp, n_in, w, n_in, 0.f, out, n_out);
}

inline void linear_backward(float* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w, int64_t M,
                            int64_t n_in, int64_t n_out, bool accumulate_dinp) {
  if (dinp) gemm_bf16(false, false, M, n_in, n_out, 1.f, dout, n_out, w, n_in, accumulate_dinp ? 1.f : 0.f, dinp, n_in);
  if (dw) gemm_bf16(true, false, n_out, n_in, M, 1.f, dout, n_out, inp, n_in, 1.f, dw, n_in);
}

}  // namespace ggtrain::kernels
