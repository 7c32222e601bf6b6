#include "nn/embedding.h"

#include <type_traits>

#include "kernels/elementwise.h"
#include "nn/packed_matrix.h"
#include "util/error.h"

namespace ggtrain::nn {

template <typename T>
Embedding<T> Embedding<T>::dense(const T* table, T* grad, int64_t vocab, int64_t C) {
  Embedding e;
  e.table_ = table;
  e.grad_ = grad;
  e.vocab_ = vocab;
  e.C_ = C;
  return e;
}

template <typename T>
Embedding<T> Embedding<T>::held(const kernels::QuantRows& rows) {
  if (!std::is_same_v<T, float>) fail("embedding: quantized rows need a float table");
  Embedding e;
  e.held_ = rows;
  e.vocab_ = rows.rows;
  e.C_ = rows.cols;
  return e;
}

template <typename T>
Embedding<T> Embedding<T>::packed(std::shared_ptr<const PackedMatrix> m) {
  if (!std::is_same_v<T, float>) fail("embedding: a packed matrix needs a float table");
  Embedding e;
  e.vocab_ = m->rows();
  e.C_ = m->cols();
  e.packed_ = std::move(m);
  return e;
}

template <typename T>
void Embedding<T>::forward(T* x, const int32_t* tokens, int64_t N) const {
  if constexpr (std::is_same_v<T, float>) {
    if (packed_) {
      for (int64_t n = 0; n < N; ++n) packed_->row(tokens[n], x + n * C_);
      return;
    }
    if (held_.data) return kernels::quant_embedding_forward(x, tokens, held_, N);
  }
  kernels::embedding_forward(x, tokens, table_, N, C_);
}

template <typename T>
void Embedding<T>::backward(const T* dx, const int32_t* tokens, int64_t N) const {
  if (grad_) kernels::embedding_backward(grad_, dx, tokens, N, C_);
}

template class Embedding<float>;
template class Embedding<double>;

}  // namespace ggtrain::nn
