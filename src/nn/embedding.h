#pragma once
// A token embedding: row tokens[n] of a table [vocab, C], in the forms a
// Linear's weight takes (nn/linear.h): float parameters (with a gradient
// when trainable), held quantized rows, or a packed inference matrix (which
// a tied output head shares).
#include <cstdint>
#include <memory>

#include "kernels/quant_linear.h"

namespace ggtrain::nn {

// The decode form (nn/packed_matrix.h), held by pointer: users of a layer
// need not see the GGUF reader and the int8 kernels behind it.
class PackedMatrix;

template <typename T>
class Embedding {
 public:
  using Value = T;
  Embedding() = default;
  static Embedding dense(const T* table, T* grad, int64_t vocab, int64_t C);
  static Embedding held(const kernels::QuantRows& rows);  // float only
  static Embedding packed(std::shared_ptr<const PackedMatrix> m);  // float only

  int64_t vocab() const { return vocab_; }
  int64_t dim() const { return C_; }
  bool trainable() const { return grad_ != nullptr; }
  // x[N, C] = table[tokens[n]]; tokens must be in [0, vocab) (the caller checks).
  void forward(T* x, const int32_t* tokens, int64_t N) const;
  // grad[tokens[n]] += dx[n] (nothing when frozen).
  void backward(const T* dx, const int32_t* tokens, int64_t N) const;

 private:
  int64_t vocab_ = 0, C_ = 0;
  const T* table_ = nullptr;
  T* grad_ = nullptr;
  kernels::QuantRows held_{};
  std::shared_ptr<const PackedMatrix> packed_;
};

extern template class Embedding<float>;
extern template class Embedding<double>;

}  // namespace ggtrain::nn
