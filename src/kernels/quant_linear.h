#pragma once
// Linear layers over a frozen weight matrix kept in a GGUF block format
// (Q8_0: 34 bytes per 32 weights; Q4_K: 144 per 256; ...), as a LoRA run
// keeps a quantized base. Each call dequantizes a band of W's rows into a
// float scratch buffer and runs the float GEMM on it (QLoRA's scheme): the
// whole matrix never exists in float, and the arithmetic is the float
// model's on the dequantized weights.
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/number_formats.h"

namespace ggtrain::kernels {

// W [rows, cols] row-major, each row row_bytes of blocks that `dequantize`
// turns into cols floats (the format's decoder; kernels/ does not know the
// formats beyond Q8_0).
struct QuantRows {
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0, row_bytes = 0;
  void (*dequantize)(const uint8_t* in, float* out, size_t n) = nullptr;
  // Plain bf16 rows (a base held in bf16 for bf16 training): products on
  // bf16 inputs read them in place, without a band.
  bool bf16 = false;
};

// Q8_0 rows (cols a multiple of 32).
inline QuantRows q8_0_rows(const uint8_t* data, int64_t rows, int64_t cols) {
  return {data, rows, cols, q8_0_row_bytes(cols), dequantize_q8_0};
}

// out[r - r0, :] = W[r, :] for r in [r0, r1).
void dequantize_rows(const QuantRows& w, int64_t r0, int64_t r1, float* out);

// out[M, w.rows] = inp[M, w.cols] W^T, dequantizing up to `band_rows` rows of
// W at a time into scratch (band_rows * w.cols floats).
void quant_linear_forward(float* out, const float* inp, const QuantRows& w, int64_t M, float* scratch,
                          int64_t band_rows);

// dinp[M, w.cols] (= or +=, per accumulate) dout[M, w.rows] W. W is frozen:
// no weight gradient.
void quant_linear_backward_input(float* dinp, const float* dout, const QuantRows& w, int64_t M, float* scratch,
                                 int64_t band_rows, bool accumulate);

// The same two on bf16 inputs (bf16 training): bands dequantized into bf16
// (band_rows * w.cols of them in scratch), products on bf16 with float
// accumulation (kernels/gemm_bf16.h).
void quant_linear_forward(float* out, const bf16* inp, const QuantRows& w, int64_t M, bf16* scratch, int64_t band_rows);
void quant_linear_backward_input(float* dinp, const bf16* dout, const QuantRows& w, int64_t M, bf16* scratch,
                                 int64_t band_rows, bool accumulate);

// x[n, :] = table[tokens[n], :] for a quantized embedding table.
void quant_embedding_forward(float* x, const int32_t* tokens, const QuantRows& table, int64_t N);

}  // namespace ggtrain::kernels
