#pragma once
// A K-quant matrix (Q4_K, Q5_K, Q6_K) unpacked once at load for inference:
// each weight one int8 quant, each group of 32 (Q4_K, Q5_K) or 16 (Q6_K)
// weights a float scale s and offset o with w = s * q - o. s and o are the
// products ggml's dequantizer forms (d * sc, dmin * m; o = 0 for Q6_K), so
// dequantizing gives ggml's values exactly. About 1.1-1.3 bytes per weight
// instead of 4 for F32: decode reads a third of the bytes.
//
// Products with activations rounded as ggml rounds them for K-quants (Q8_K:
// per 256 values an int8 quant and a float scale dx):
//   sum_i w_i x_i = sum over 256-blocks dx * sum_groups (s * sum q qx - o * sum qx)
// the integer sums exact, as in ggml's own dot products.
#include <cstdint>
#include <vector>

#include "gguf/types.h"

namespace ggtrain::quant {

struct KRows {
  int64_t rows = 0, cols = 0, group = 32;
  std::vector<int8_t> q;              // rows * cols
  std::vector<float> scale, offset;   // rows * cols / group each

  // rows x cols weights of type t (cols a multiple of 256), as stored in GGUF.
  static KRows unpack(gguf::TensorType t, const uint8_t* data, int64_t rows, int64_t cols);
  // Rows [r0, r1) as floats into out ((r1 - r0) * cols).
  void dequantize(int64_t r0, int64_t r1, float* out) const;
};

// Activations of one token rounded to Q8_K: qx (cols int8), dx (one float
// per 256), group sums of qx (one per `group`).
struct Q8KActivations {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> group_sum;
  void quantize(const float* x, int64_t cols, int64_t group);
};

// y[r] = row r of w . x for every row (threads over rows when large).
void k_rows_matvec(const KRows& w, const Q8KActivations& x, float* y);

}  // namespace ggtrain::quant

namespace ggtrain::quant {

// The same weights repacked for AVX512-VNNI (as kernels/q8_packed.h does for
// Q8_0): rows in groups of 16, each 256-block as 64 chunks of (16 rows x 4
// weights) of unsigned quants (Q6_K's q + 32), so one vpdpbusd multiplies 4
// weights of 16 rows by 4 int8 activations; per row and group a scale and
// the offset the kernel subtracts (o, or 32 s for Q6_K) times the group's
// activation sum. Quants that fit 4 bits (Q4_K's) go two to a byte, chunk
// 2c in the low nibbles and 2c + 1 in the high ones of the same 64 bytes:
// decode reads about 6 bits per weight instead of 10.
struct KPacked {
  int64_t rows = 0, cols = 0, group = 32, shift = 0;
  bool nibbles = false;
  std::vector<uint8_t> q;         // [row group][256-block][chunk (pair if nibbles)][row 0..15][4]
  std::vector<float> scale, offset;  // [row group][group index in the row][row 0..15]

  static bool available();  // built with AVX512F + AVX512-VNNI
  static KPacked pack(const KRows& k);
  void row(int64_t r, float* out) const;  // ggml's dequantized values

 private:
  size_t byte_of(int64_t g, int64_t lane, int64_t b, int64_t i) const;
  int quant_at(size_t byte, int64_t i) const;
};

// y[n, rows] for n tokens of activations (x: n rows of floats, rounded to Q8_K here).
void k_packed_matmul(const KPacked& w, const float* x, int64_t n, float* y);

}  // namespace ggtrain::quant
