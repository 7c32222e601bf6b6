#include "kernels/quant_linear.h"

#include <algorithm>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/parallel.h"

namespace ggtrain::kernels {

void dequantize_rows(const QuantRows& w, int64_t r0, int64_t r1, float* out) {
#pragma omp parallel for if ((r1 - r0) * w.cols >= kMinParallelWork)
  for (int64_t r = r0; r < r1; ++r) w.dequantize(w.data + r * w.row_bytes, out + (r - r0) * w.cols, size_t(w.cols));
}

void quant_linear_forward(float* out, const float* inp, const QuantRows& w, int64_t M, float* scratch,
                          int64_t band_rows) {
  for (int64_t r0 = 0; r0 < w.rows; r0 += band_rows) {
    const int64_t n = std::min(band_rows, w.rows - r0);
    dequantize_rows(w, r0, r0 + n, scratch);
    // out[:, r0 : r0 + n] = inp band^T: the band's columns of out, row stride w.rows
    gemm(false, true, M, n, w.cols, 1.f, inp, w.cols, scratch, w.cols, 0.f, out + r0, w.rows);
  }
}

void quant_linear_backward_input(float* dinp, const float* dout, const QuantRows& w, int64_t M, float* scratch,
                                 int64_t band_rows, bool accumulate) {
  for (int64_t r0 = 0; r0 < w.rows; r0 += band_rows) {
    const int64_t n = std::min(band_rows, w.rows - r0);
    dequantize_rows(w, r0, r0 + n, scratch);
    // dinp (+)= dout[:, r0 : r0 + n] band: the bands' contributions add up
    const float beta = accumulate || r0 > 0 ? 1.f : 0.f;
    gemm(false, false, M, w.cols, n, 1.f, dout + r0, w.rows, scratch, w.cols, beta, dinp, w.cols);
  }
}

namespace {
// out[r - r0, :] = W[r, :] rounded to bf16, through a float row per thread.
void dequantize_rows(const QuantRows& w, int64_t r0, int64_t r1, bf16* out) {
#pragma omp parallel if ((r1 - r0) * w.cols >= kMinParallelWork)
  {
    std::vector<float> row(size_t(w.cols));
#pragma omp for
    for (int64_t r = r0; r < r1; ++r) {
      w.dequantize(w.data + r * w.row_bytes, row.data(), size_t(w.cols));
      to_bf16_row(out + (r - r0) * w.cols, row.data(), w.cols);
    }
  }
}
}  // namespace

void quant_linear_forward(float* out, const bf16* inp, const QuantRows& w, int64_t M, bf16* scratch,
                          int64_t band_rows) {
  if (w.bf16) {
    const auto* rows = reinterpret_cast<const bf16*>(w.data);
    return gemm_bf16(false, true, M, w.rows, w.cols, 1.f, inp, w.cols, rows, w.cols, 0.f, out, w.rows);
  }
  for (int64_t r0 = 0; r0 < w.rows; r0 += band_rows) {
    const int64_t n = std::min(band_rows, w.rows - r0);
    dequantize_rows(w, r0, r0 + n, scratch);
    gemm_bf16(false, true, M, n, w.cols, 1.f, inp, w.cols, scratch, w.cols, 0.f, out + r0, w.rows);
  }
}

void quant_linear_backward_input(float* dinp, const bf16* dout, const QuantRows& w, int64_t M, bf16* scratch,
                                 int64_t band_rows, bool accumulate) {
  if (w.bf16) {
    const auto* rows = reinterpret_cast<const bf16*>(w.data);
    return gemm_bf16(false, false, M, w.cols, w.rows, 1.f, dout, w.rows, rows, w.cols, accumulate ? 1.f : 0.f, dinp,
                     w.cols);
  }
  for (int64_t r0 = 0; r0 < w.rows; r0 += band_rows) {
    const int64_t n = std::min(band_rows, w.rows - r0);
    dequantize_rows(w, r0, r0 + n, scratch);
    const float beta = accumulate || r0 > 0 ? 1.f : 0.f;
    gemm_bf16(false, false, M, w.cols, n, 1.f, dout + r0, w.rows, scratch, w.cols, beta, dinp, w.cols);
  }
}

void quant_embedding_forward(float* x, const int32_t* tokens, const QuantRows& table, int64_t N) {
#pragma omp parallel for if (N * table.cols >= kMinParallelWork)
  for (int64_t n = 0; n < N; ++n)
    table.dequantize(table.data + int64_t(tokens[n]) * table.row_bytes, x + n * table.cols, size_t(table.cols));
}

}  // namespace ggtrain::kernels
