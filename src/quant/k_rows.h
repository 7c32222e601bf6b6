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
  std::vector<int8_t> q;  // rows * cols
  std::vector<float> scale, offset;  // rows * cols / group each

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

// The same weights repacked for AVX512-VNNI or AVX2 (as kernels/q8_packed.h
// does for Q8_0), about as many bits per weight as in the file, since decode reads
// every one per token: rows in groups of 16; per 256-block the quants' low 4
// bits in chunk pairs (16 rows x 4 weights, chunk 2c in the low nibbles and
// 2c + 1 in the high ones of the same 64 bytes), the rest (Q5_K's fifth bit,
// Q6_K's top two of q + 32) in one 64-byte plane per group, chunk k of the
// group at bits [b k, b (k + 1)); per row and block ggml's d and dmin, per
// row and group its 6-bit sc and m (Q6_K: int8 sc). One vpdpbusd multiplies
// 4 weights of 16 rows by 4 int8 activations (AVX2: vpmaddubsw and vpmaddwd
// on each half of the rows); the kernel forms the group's
// s = d sc and o = dmin m (Q6_K: 32 s) as ggml's dequantizer does and
// subtracts o times the group's activation sum. Bytes per 256 weights: Q4_K
// 152 (file 144), Q5_K 184 (176), Q6_K 216 (210).
struct KPacked {
  int64_t rows = 0, cols = 0, group = 32, shift = 0;
  int high_bits = 0;  // 0 Q4_K, 1 Q5_K, 2 Q6_K
  std::vector<uint8_t> low;  // [row group][block][chunk pair][row 0..15][4]
  std::vector<uint8_t> high;  // [row group][block][group][row 0..15][4]
  std::vector<float> d, dmin;  // [row group][block][row 0..15]
  std::vector<int8_t> sc, m;  // [row group][block][group][row 0..15]

  static bool available();  // built with AVX512F + AVX512-VNNI, or AVX2 + FMA
  // rows x cols weights of K-quant type t (cols a multiple of 256), as stored in GGUF.
  static KPacked pack(gguf::TensorType t, const uint8_t* data, int64_t rows, int64_t cols);
  void row(int64_t r, float* out) const;  // ggml's dequantized values
  int64_t blocks() const { return cols / 256; }

 private:
  size_t low_byte(int64_t g, int64_t lane, int64_t b, int64_t i) const;
  size_t high_byte(int64_t g, int64_t lane, int64_t b, int64_t i) const;
  int quant(int64_t g, int64_t lane, int64_t b, int64_t i) const;  // as stored (Q6_K: q + 32)
};

// y[n, rows] for n tokens of activations (x: n rows of floats, rounded to Q8_K here).
void k_packed_matmul(const KPacked& w, const float* x, int64_t n, float* y);

}  // namespace ggtrain::quant
