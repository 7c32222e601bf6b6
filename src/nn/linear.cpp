#include "nn/linear.h"

#include <algorithm>
#include <type_traits>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "nn/packed_matrix.h"
#include "util/error.h"

namespace ggtrain::nn {

template <typename T>
Linear<T> Linear<T>::dense(const T* w, T* grad, int64_t n_out, int64_t n_in, const kernels::bf16* shadow) {
  Linear l;
  l.w_ = w;
  l.grad_ = grad;
  l.shadow_ = shadow;
  l.n_out_ = n_out;
  l.n_in_ = n_in;
  return l;
}

template <typename T>
Linear<T> Linear<T>::held(const kernels::QuantRows& rows, float* scratch, int64_t scratch_floats) {
  if (!std::is_same_v<T, float>) fail("linear: quantized rows need a float layer");
  if (scratch_floats < rows.cols) fail("linear: a scratch of {} floats holds no row of {}", scratch_floats, rows.cols);
  Linear l;
  l.held_ = rows;
  l.band_ = scratch;
  l.band_rows_ = scratch_floats / rows.cols;
  l.n_out_ = rows.rows;
  l.n_in_ = rows.cols;
  return l;
}

template <typename T>
Linear<T> Linear<T>::packed(std::shared_ptr<const PackedMatrix> m) {
  if (!std::is_same_v<T, float>) fail("linear: a packed matrix needs a float layer");
  Linear l;
  l.n_out_ = m->rows();
  l.n_in_ = m->cols();
  l.packed_ = std::move(m);
  return l;
}

template <typename T>
void Linear<T>::add_lora(const LoraBranch<T>& branch) {
  if (branch.rank <= 0 || !branch.a || !branch.b || !branch.u)
    fail("linear: a LoRA branch needs A, B, a rank and its u buffer");
  loras_.push_back(branch);
}

template <typename T>
void Linear<T>::forward_base(T* y, const GemmIn<T>& x, int64_t M) const {
  if constexpr (std::is_same_v<T, float>) {
    if (packed_) return packed_->matmul(x.fp32, y, M);
    if (held_.data && x.bf16)  // the bf16 band fits in the float scratch twice over
      return kernels::quant_linear_forward(y, x.bf16, held_, M, reinterpret_cast<kernels::bf16*>(band_), band_rows_);
    if (held_.data) return kernels::quant_linear_forward(y, x.fp32, held_, M, band_, band_rows_);
    if (x.bf16) return kernels::linear_forward(y, x.bf16, shadow_, M, n_in_, n_out_);
  }
  kernels::linear_forward(y, x.fp32, w_, M, n_in_, n_out_);
}

template <typename T>
void Linear<T>::forward_lora(T* y, const GemmIn<T>& x, int64_t M) const {
  for (const auto& b : loras_) b.forward(y, x, M, n_in_, n_out_);
}

template <typename T>
void Linear<T>::backward_base(T* dx, const GemmIn<T>& dy, const GemmIn<T>& x, int64_t M, bool accumulate) const {
  if (packed_) fail("linear: a packed (inference) matrix has no backward pass");
  if constexpr (std::is_same_v<T, float>) {
    if (held_.data) {  // frozen: no weight gradient
      if (dx && dy.bf16)
        kernels::quant_linear_backward_input(dx, dy.bf16, held_, M, reinterpret_cast<kernels::bf16*>(band_), band_rows_,
                                             accumulate);
      else if (dx) kernels::quant_linear_backward_input(dx, dy.fp32, held_, M, band_, band_rows_, accumulate);
      return;
    }
    if (dy.bf16) return kernels::linear_backward(dx, grad_, dy.bf16, x.bf16, shadow_, M, n_in_, n_out_, accumulate);
  }
  kernels::linear_backward(dx, grad_, dy.fp32, x.fp32, w_, M, n_in_, n_out_, accumulate);
}

template <typename T>
void Linear<T>::backward_lora(T* dx, const GemmIn<T>& dy, const GemmIn<T>& x, int64_t M) const {
  for (const auto& b : loras_) b.backward(dx, dy, x, M, n_in_, n_out_);
}

template class Linear<float>;
template class Linear<double>;

}  // namespace ggtrain::nn
