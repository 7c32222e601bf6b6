#pragma once
// A weight matrix packed for decode, as inference reads it: F32 straight
// from the GGUF memory map (zero-copy); Q8_0 repacked at load for the VNNI
// int8 kernels (kernels/q8_packed.h; read in place where the build lacks
// them); Q4_0 and Q5_0 re-encoded exactly as Q8_0 blocks at load, then the same; the
// K-quants unpacked at load into int8 quants with group scales
// (quant/k_rows.h); F16, BF16, Q4_1 and Q5_1 dequantized once at load. Like
// ggml, the activations are first rounded to the weight's "dot type" (F16,
// BF16, Q8_0 blocks with an fp16 scale, or Q8_K blocks of 256 with a float
// scale for the K-quants), so results match llama.cpp's arithmetic.
#include <cstdint>
#include <memory>
#include <vector>

#include "gguf/reader.h"
#include "kernels/q8_packed.h"
#include "quant/k_rows.h"

namespace ggtrain::nn {

class PackedMatrix {
 public:
  PackedMatrix() = default;
  // rows x cols row-major, i.e. ggml ne = [cols, rows].
  PackedMatrix(const gguf::GgufFile& f, const gguf::TensorInfo& t);
  // Views of weights in memory (a training run's parameters, a quantized
  // base it holds, any type readable() accepts); `data` must outlive the
  // matrix.
  PackedMatrix(const float* data, int64_t rows, int64_t cols);
  PackedMatrix(gguf::TensorType type, const uint8_t* data, int64_t rows, int64_t cols);
  static bool readable(gguf::TensorType t);
  // Movable, not copyable: data_ may point into owned_.
  PackedMatrix(PackedMatrix&&) = default;
  PackedMatrix& operator=(PackedMatrix&&) = default;
  PackedMatrix(const PackedMatrix&) = delete;
  PackedMatrix& operator=(const PackedMatrix&) = delete;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  gguf::TensorType type() const { return type_; }
  // y[n, rows] = x[n, cols] * W^T in the arithmetic of ggml's dot type
  // (adapters are nn::Linear's LoRA branches, added after this)
  void matmul(const float* x, float* y, int64_t n) const;
  // Row r as floats (embedding lookup).
  void row(int64_t r, float* out) const;

 private:
  gguf::TensorType type_ = gguf::TensorType::F32;  // storage used by matmul: F32, Q8_0 or a K-quant
  gguf::TensorType act_type_ = gguf::TensorType::F32;  // activations are rounded to this
  const uint8_t* data_ = nullptr;
  std::vector<float> owned_;  // dequantized copy (F16, BF16, Q4_1, Q5_1, K-quants)
  std::vector<uint8_t> owned_bytes_;  // Q4_0/Q5_0 re-encoded as Q8_0
  std::vector<float> block_mins_;  // Q4_1, Q5_1: each row's block mins, [rows, cols / 32]
  std::unique_ptr<quant::KRows> krows_;  // Q4_K/Q5_K/Q6_K (type_ says which), no VNNI build
  std::unique_ptr<quant::KPacked> kpacked_;  // the same, repacked for the VNNI kernels
  std::unique_ptr<kernels::Q8Packed> packed_;  // Q8_0 from a file, where AVX512-VNNI is built in
  int64_t rows_ = 0, cols_ = 0;
  void pack_q8_0();
  void k_quant_matmul(const float* x, float* y, int64_t n) const;
  void add_q8_1_sum_rounding(const float* x, const float* rounded, float* y, int64_t n) const;
};

}  // namespace ggtrain::nn
