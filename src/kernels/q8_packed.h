#pragma once
// Q8_0 weights repacked for int8 matrix products with AVX512-VNNI, the way
// llama.cpp's CPU backend repacks weights for its prompt kernels: rows in
// groups of 16, each 32-weight block stored as 8 chunks of (16 rows x 4
// consecutive weights), so one vpdpbusd multiplies 4 weights of 16 rows by
// 4 activations of one token. vpdpbusd takes one unsigned operand: the
// weights are stored as q_w + 128, and the 128 * sum(q_x) this adds is
// taken off per block, once per token for all rows:
//   sum q_w q_x = sum (q_w + 128) q_x - 128 sum q_x
// exactly (integers), so each block's product is ggml's up to the float
// rounding of the scaling. 34 bytes per 32 weights, as Q8_0 itself (the
// fp16 scales kept): decode reads no more than from the file. Used for
// prompts and decode alike.
#include <cstdint>
#include <vector>

namespace ggtrain::kernels {

struct Q8Packed {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> q;  // [row group][block][chunk 0..7][row 0..15][4]: q_w + 128
  std::vector<uint16_t> scale;  // [row group][block][row]: d_w as fp16, as in the file

  // Whether this build has the kernels (AVX512F + AVX512-VNNI).
  static bool available();
  // rows x cols Q8_0 blocks (cols a multiple of 32), row-major as in GGUF.
  static Q8Packed pack(const uint8_t* q8_0, int64_t rows, int64_t cols);
  // Row r dequantized (d_w q_w, as dequantize_q8_0 gives).
  void row(int64_t r, float* out) const;
};

// y[n, rows] = xq W^T for n tokens of Q8_0 activations (n rows of Q8_0
// blocks, e.g. from quantize_q8_0_activations).
void q8_packed_matmul(const Q8Packed& w, const uint8_t* xq, int64_t n, float* y);

}  // namespace ggtrain::kernels
