#pragma once
// One linear layer y = x W^T (W [n_out, n_in], row-major like nn.Linear and
// ggml) in whichever form its weight has, plus optional LoRA branches. The
// training passes and the decoder both project through it:
//   dense   float parameters (fp32 or double), with a bf16 shadow in bf16
//           training and a gradient when trainable;
//   held    frozen rows in a GGUF block format (a LoRA run on a quantized
//           base), dequantized a band at a time into a planned scratch;
//   packed  a matrix as inference reads it (nn/packed_matrix.h: repacked
//           for the int8 kernels, activations rounded like ggml's).
// A Linear views memory that its owner planned; it owns only a packed
// matrix, which a tied embedding may share.
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/quant_linear.h"
#include "nn/gemm_in.h"
#include "nn/lora_branch.h"

namespace ggtrain::nn {

// The decode form (nn/packed_matrix.h), held by pointer: users of a layer
// need not see the GGUF reader and the int8 kernels behind it.
class PackedMatrix;

template <typename T>
class Linear {
 public:
  Linear() = default;
  // Float parameters; grad null when frozen; shadow: their bf16 rounding,
  // which bf16 inputs multiply.
  static Linear dense(const T* w, T* grad, int64_t n_out, int64_t n_in, const kernels::bf16* shadow = nullptr);
  // Frozen quantized rows, `scratch` holding scratch_floats floats (at
  // least one row). Float layers only.
  static Linear held(const kernels::QuantRows& rows, float* scratch, int64_t scratch_floats);
  // The inference form. Float layers only.
  static Linear packed(std::shared_ptr<const PackedMatrix> m);

  int64_t n_in() const { return n_in_; }
  int64_t n_out() const { return n_out_; }
  bool has_lora() const { return !loras_.empty(); }
  void add_lora(const LoraBranch<T>& branch);
  // Points the branches' x A^T at `u` ([M, rank] for the next forward and
  // its backward): an expert's rows move within its layer's buffer from one
  // batch to the next.
  void set_lora_rows(T* u) {
    for (auto& b : loras_) b.u = u;
  }

  // y[M, n_out] = x W^T (+ every LoRA branch).
  void forward(T* y, const GemmIn<T>& x, int64_t M) const {
    forward_base(y, x, M);
    forward_lora(y, x, M);
  }
  // The two halves, for callers that time them apart.
  void forward_base(T* y, const GemmIn<T>& x, int64_t M) const;
  void forward_lora(T* y, const GemmIn<T>& x, int64_t M) const;
  // From dy = dL/dy: dx (= or +=, per accumulate; null: not needed) and the
  // weight's gradient (+=, when it has one). dy as the GEMMs read it.
  void backward_base(T* dx, const GemmIn<T>& dy, const GemmIn<T>& x, int64_t M, bool accumulate) const;
  void backward_lora(T* dx, const GemmIn<T>& dy, const GemmIn<T>& x, int64_t M) const;

 private:
  int64_t n_in_ = 0, n_out_ = 0;
  const T* w_ = nullptr;
  T* grad_ = nullptr;
  const kernels::bf16* shadow_ = nullptr;
  kernels::QuantRows held_{};
  float* band_ = nullptr;
  int64_t band_rows_ = 0;
  std::shared_ptr<const PackedMatrix> packed_;
  std::vector<LoraBranch<T>> loras_;
};

extern template class Linear<float>;
extern template class Linear<double>;

}  // namespace ggtrain::nn
