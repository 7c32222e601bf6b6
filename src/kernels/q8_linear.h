#pragma once
// Linear layers over a frozen weight matrix kept as GGUF Q8_0 blocks (34
// bytes per 32 weights: an fp16 scale and 32 int8), as a LoRA run keeps a
// Q8_0 base. Each call dequantizes a band of W's rows into a float scratch
// buffer and runs the float GEMM on it (QLoRA's scheme): the whole matrix
// never exists in float, and the arithmetic is the float model's on the
// dequantized weights.
#include <cstdint>

#include "kernels/number_formats.h"

namespace ggtrain::kernels {

// W [rows, cols] row-major as Q8_0 blocks; cols is a multiple of 32.
struct Q8Rows {
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t row_bytes() const { return q8_0_row_bytes(cols); }
};

// out[r - r0, :] = W[r, :] for r in [r0, r1).
void q8_dequantize_rows(const Q8Rows& w, int64_t r0, int64_t r1, float* out);

// out[M, w.rows] = inp[M, w.cols] W^T, dequantizing up to `band_rows` rows of
// W at a time into scratch (band_rows * w.cols floats).
void q8_linear_forward(float* out, const float* inp, const Q8Rows& w, int64_t M, float* scratch,
                       int64_t band_rows);

// dinp[M, w.cols] (= or +=, per accumulate) dout[M, w.rows] W. W is frozen:
// no weight gradient.
void q8_linear_backward_input(float* dinp, const float* dout, const Q8Rows& w, int64_t M, float* scratch,
                              int64_t band_rows, bool accumulate);

// x[n, :] = table[tokens[n], :] for a Q8_0 embedding table.
void q8_embedding_forward(float* x, const int32_t* tokens, const Q8Rows& table, int64_t N);

}  // namespace ggtrain::kernels
