#pragma once
// The low-rank branch of a LoRA adapter beside a linear layer y = x W^T:
// y += s (x A^T) B^T with A [rank, n_in], B [n_out, rank], in F32 after the
// base product, as llama.cpp applies adapters. Training keeps u = x A^T for
// the backward pass; inference points u at a scratch it reuses.
#include <cstdint>

#include "kernels/lora.h"

namespace ggtrain::nn {

template <typename T>
struct LoraBranch {
  const T* a = nullptr;  // [rank, n_in]
  const T* b = nullptr;  // [n_out, rank]
  int64_t rank = 0;
  T scale = T(1);  // alpha / rank, times a user's --lora-scale
  T* u = nullptr;  // [M, rank] x A^T, written by forward
  // Training only: the adapter's gradients (null: frozen) and a [M, rank] scratch.
  T *grad_a = nullptr, *grad_b = nullptr, *du = nullptr;

  void forward(T* y, const T* x, int64_t M, int64_t n_in, int64_t n_out) const {
    kernels::lora_forward(y, u, x, a, b, M, n_in, n_out, rank, scale);
  }
  // dx += the branch's share (dx null: not needed); grad_a/grad_b +=.
  void backward(T* dx, const T* dy, const T* x, int64_t M, int64_t n_in, int64_t n_out) const {
    kernels::lora_backward(dx, grad_a, grad_b, du, dy, x, u, a, b, M, n_in, n_out, rank, scale);
  }
};

}  // namespace ggtrain::nn
