#pragma once
// Row-major GEMM on bf16 inputs with float output and accumulation:
// C[M,N] = alpha * op(A) * op(B) + beta * C, beta 0 or 1. oneDNN's matmul
// primitive (its AVX512_BF16 brgemm kernels where the CPU has them); one
// primitive per shape, created on first use and kept.
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/gemm.h"

namespace ggtrain::kernels {

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
               const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Whether oneDNN runs bf16 matmuls with native instructions here (else it
// emulates them, slower than float).
bool bf16_gemm_is_native();

// Multiply-adds times two that gemm_bf16 has done in this process: what
// tests read to see that a layer's products really ran on bf16 inputs
// (speed cannot show it on a machine that emulates bf16).
int64_t bf16_gemm_flops();

// y[M, n_out] = x W^T, dinp/dw as linear_backward (gemm.h), all on bf16 inputs.
inline void linear_forward(float* out, const bf16* inp, const bf16* w, int64_t M, int64_t n_in, int64_t n_out) {
  gemm_bf16(false, true, M, n_out, n_in, 1.f, inp, n_in, w, n_in, 0.f, out, n_out);
}

inline void linear_backward(float* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w, int64_t M,
                            int64_t n_in, int64_t n_out, bool accumulate_dinp) {
  if (dinp) gemm_bf16(false, false, M, n_in, n_out, 1.f, dout, n_out, w, n_in, accumulate_dinp ? 1.f : 0.f, dinp, n_in);
  if (dw) gemm_bf16(true, false, n_out, n_in, M, 1.f, dout, n_out, inp, n_in, 1.f, dw, n_in);
}

// The LoRA branch (kernels/lora.h) when x arrives in bf16 (bf16 training):
// u = x A^T on bf16 inputs (A's bf16 rounding), y += s u B^T in float.
inline void lora_forward(float* out, float* u, const bf16* inp, const bf16* A, const float* B, int64_t M, int64_t n_in,
                         int64_t n_out, int64_t r, float scale) {
  gemm_bf16(false, true, M, r, n_in, 1.f, inp, n_in, A, n_in, 0.f, u, r);
  gemm(false, true, M, n_out, r, scale, u, r, B, r, 1.f, out, n_out);
}

// lora_backward's terms with x and dout in bf16, each product on bf16 inputs
// (A_h, B_h: the adapter's roundings) accumulating in float: dB += s dout^T u
// and du = s dout B read dout in bf16, dA += du^T x and dinp += du A take
// du's rounding. uh [M, r] holds u's rounding, then du's.
inline void lora_backward(float* dinp, float* dA, float* dB, float* du, bf16* uh, const bf16* dout, const bf16* inp,
                          const float* u, const bf16* A_h, const bf16* B_h, int64_t M, int64_t n_in, int64_t n_out,
                          int64_t r, float scale) {
  if (dB) {
    to_bf16(uh, u, M * r);
    gemm_bf16(true, false, n_out, r, M, scale, dout, n_out, uh, r, 1.f, dB, r);
  }
  gemm_bf16(false, false, M, r, n_out, scale, dout, n_out, B_h, r, 0.f, du, r);  // du = s dout B
  to_bf16(uh, du, M * r);
  if (dA) gemm_bf16(true, false, r, n_in, M, 1.f, uh, r, inp, n_in, 1.f, dA, n_in);
  if (dinp) gemm_bf16(false, false, M, n_in, r, 1.f, uh, r, A_h, n_in, 1.f, dinp, n_in);
}

}  // namespace ggtrain::kernels
