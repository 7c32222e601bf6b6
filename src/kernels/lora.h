#pragma once
// The low-rank branch of a LoRA adapter on a linear layer y = x W^T:
// y += s * (x A^T) B^T, A [r, n_in], B [n_out, r], s = alpha / r (as llama.cpp
// applies adapters). u = x A^T [M, r] is kept for the backward pass.
#include <cstdint>

#include "kernels/gemm.h"

namespace ggtrain::kernels {

template <typename T>
void lora_forward(T* out, T* u, const T* inp, const T* A, const T* B, int64_t M, int64_t n_in, int64_t n_out, int64_t r,
                  T scale) {
  gemm(false, true, M, r, n_in, T(1), inp, n_in, A, n_in, T(0), u, r);  // u = x A^T
  gemm(false, true, M, n_out, r, scale, u, r, B, r, T(1), out, n_out);  // y += s u B^T
}

// dinp += s (dout B) A; dA += s (dout B)^T x; dB += s dout^T u. du [M, r] is
// scratch. dA/dB may be null (frozen adapter), dinp null when not needed.
template <typename T>
void lora_backward(T* dinp, T* dA, T* dB, T* du, const T* dout, const T* inp, const T* u, const T* A, const T* B,
                   int64_t M, int64_t n_in, int64_t n_out, int64_t r, T scale) {
  gemm(false, false, M, r, n_out, scale, dout, n_out, B, r, T(0), du, r);  // du = s dout B
  if (dB) gemm(true, false, n_out, r, M, scale, dout, n_out, u, r, T(1), dB, r);
  if (dA) gemm(true, false, r, n_in, M, T(1), du, r, inp, n_in, T(1), dA, n_in);
  if (dinp) gemm(false, false, M, n_in, r, T(1), du, r, A, n_in, T(1), dinp, n_in);
}

}  // namespace ggtrain::kernels
