#pragma once
// The low-rank branch of a LoRA adapter beside a linear layer y = x W^T:
// y += s (x A^T) B^T with A [rank, n_in], B [n_out, rank], in F32 after the
// base product, as llama.cpp applies adapters. Training keeps u = x A^T for
// the backward pass; inference points u at a scratch it reuses. In bf16
// training x and dy arrive in bf16 and every product but y += s u B^T runs on
// bf16 inputs (A's and B's bf16 shadows, u and du rounded): the branch is
// bound by reading dy and writing dx, which bf16 halves, while y's float
// read-modify-write costs the same either way.
#include <cstdint>
#include <type_traits>

#include "kernels/gemm_bf16.h"
#include "kernels/lora.h"
#include "nn/gemm_in.h"
#include "util/error.h"

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
  // bf16 training only: A's bf16 shadow, a [M, rank] scratch for the
  // rounding of u and then du, and B's bf16 shadow.
  const kernels::bf16* a_bf16 = nullptr;
  kernels::bf16* du_bf16 = nullptr;
  const kernels::bf16* b_bf16 = nullptr;

  void forward(T* y, const GemmIn<T>& x, int64_t M, int64_t n_in, int64_t n_out) const {
    if constexpr (std::is_same_v<T, float>) {
      if (x.bf16) {
        if (!a_bf16) fail("lora: a bf16 input needs the adapter's bf16 shadow");
        return kernels::lora_forward(y, u, x.bf16, a_bf16, b, M, n_in, n_out, rank, scale);
      }
    }
    kernels::lora_forward(y, u, x.fp32, a, b, M, n_in, n_out, rank, scale);
  }
  // dx += the branch's share (dx null: not needed); grad_a/grad_b +=. dy as
  // the base's GEMMs read it (bf16 in bf16 training).
  void backward(T* dx, const GemmIn<T>& dy, const GemmIn<T>& x, int64_t M, int64_t n_in, int64_t n_out) const {
    if constexpr (std::is_same_v<T, float>) {
      if (x.bf16 && dy.bf16) {
        if (!du_bf16 || !a_bf16 || !b_bf16) fail("lora: bf16 inputs need the adapter's bf16 shadows and scratch");
        return kernels::lora_backward(dx, grad_a, grad_b, du, du_bf16, dy.bf16, x.bf16, u, a_bf16, b_bf16, M, n_in,
                                      n_out, rank, scale);
      }
      if (x.bf16) fail("lora: a bf16 input needs dy in bf16 too");
    }
    kernels::lora_backward(dx, grad_a, grad_b, du, dy.fp32, x.fp32, u, a, b, M, n_in, n_out, rank, scale);
  }
};

}  // namespace ggtrain::nn
