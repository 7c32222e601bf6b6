#include "nn/packed_matrix.h"

#include <algorithm>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/number_formats.h"
#include "kernels/parallel.h"
#include "kernels/q8_dot.h"
#include "kernels/q8_packed.h"
#include "kernels/quant_linear.h"
#include "quant/blocks.h"
#include "quant/k_rows.h"
#include "quant/type_traits.h"
#include "util/error.h"

namespace ggtrain::nn {

using gguf::TensorType;

PackedMatrix::PackedMatrix(const gguf::GgufFile& f, const gguf::TensorInfo& t) {
  if (t.n_dims > 2) fail("{}: tensor '{}' has {} dimensions, expected a matrix", f.path(), t.name, t.n_dims);
  if (!readable(t.type))
    fail("{}: tensor '{}' has type {}; inference reads {}", f.path(), t.name, gguf::type_name(t.type),
         quant::codec_type_names());
  *this = PackedMatrix(t.type, t.data, t.n_dims >= 2 ? int64_t(t.ne[1]) : 1, int64_t(t.ne[0]));
}

bool PackedMatrix::readable(TensorType t) { return quant::find_codec(t) != nullptr; }

PackedMatrix::PackedMatrix(TensorType type, const uint8_t* data, int64_t rows, int64_t cols)
    : type_(type), act_type_(type), data_(data), rows_(rows), cols_(cols) {
  const quant::TypeCodec& codec = quant::codec(type, "multiply with");
  switch (codec.decode) {
    case quant::DecodeForm::kFloat: break;
    case quant::DecodeForm::kQ8_0: pack_q8_0(); break;
    case quant::DecodeForm::kAsQ8_0:
      owned_bytes_.resize(size_t(rows_ * kernels::q8_0_row_bytes(cols_)));
      codec.to_q8_0(data, owned_bytes_.data(), size_t(rows_ * cols_));
      data_ = owned_bytes_.data();
      type_ = act_type_ = TensorType::Q8_0;
      pack_q8_0();
      break;
    case quant::DecodeForm::kKRows: {
      if (quant::KPacked::available())
        kpacked_ = std::make_unique<quant::KPacked>(quant::KPacked::pack(type_, data, rows_, cols_));
      else krows_ = std::make_unique<quant::KRows>(quant::KRows::unpack(type_, data, rows_, cols_));
      data_ = nullptr;
      break;
    }
    case quant::DecodeForm::kWidened:
      if (codec.block_mins) {  // ggml's Q8_1 block sums meet Q4_1's and Q5_1's mins
        block_mins_.resize(size_t(rows_ * cols_ / 32));
        codec.block_mins(data, block_mins_.data(), size_t(rows_ * cols_));
      }
      owned_.resize(size_t(rows_ * cols_));
      codec.to_float(data, owned_.data(), owned_.size());
      data_ = reinterpret_cast<const uint8_t*>(owned_.data());
      type_ = TensorType::F32;
      break;
  }
}

// The VNNI kernels read a repacked copy (the file's or the run's Q8_0 rows
// are then no longer needed here).
void PackedMatrix::pack_q8_0() {
  if (!kernels::Q8Packed::available()) return;
  packed_ = std::make_unique<kernels::Q8Packed>(kernels::Q8Packed::pack(data_, rows_, cols_));
  owned_bytes_ = {};
  data_ = nullptr;
}

PackedMatrix::PackedMatrix(const float* data, int64_t rows, int64_t cols)
    : data_(reinterpret_cast<const uint8_t*>(data)), rows_(rows), cols_(cols) {}

namespace {

// Batches of at least this many rows go through dequantized bands and a
// float GEMM instead of row-by-row int8 dot products (faster from here on,
// measured on the s15 shapes).
constexpr int64_t kGemmRows = 8;
// F32 weights: through matrices of at least kF32LargeMatrix elements,
// batches of at least kF32MatmulRows rows go to oneDNN's matmul primitive
// and fewer rows multiply as y^T = W x^T.
constexpr int64_t kF32MatmulRows = 16, kF32LargeMatrix = int64_t(1) << 20;

float dot_f32(const float* w, const float* x, int64_t n) {
  float acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += w[i] * x[i];
  return acc;
}

// x rounded through the activation type: what ggml feeds its dot products.
const float* round_activations(TensorType t, const float* x, int64_t count) {
  const quant::RoundFn round = quant::codec(t, "round activations for").round_activations;
  if (!round) return x;
  thread_local std::vector<float> buf;
  buf.resize(size_t(count));
  round(x, buf.data(), size_t(count));
  return buf.data();
}

}  // namespace

void PackedMatrix::k_quant_matmul(const float* x_in, float* y, int64_t n) const {
  if (n >= kGemmRows) {
    // A prompt: bands of dequantized rows and a float GEMM on the activations
    // rounded to Q8_K, as for Q8_0 below.
    thread_local std::vector<float> xr, band;
    xr.resize(size_t(n * cols_));
    quant::round_activations_for(type_, x_in, xr.data(), size_t(n * cols_));
    const int64_t band_rows = std::max<int64_t>(1, (int64_t(1) << 18) / cols_);
    band.resize(size_t(std::min(band_rows, rows_) * cols_));
    for (int64_t r0 = 0; r0 < rows_; r0 += band_rows) {
      const int64_t m = std::min(band_rows, rows_ - r0);
      krows_->dequantize(r0, r0 + m, band.data());
      kernels::gemm(false, true, n, m, cols_, 1.0f, xr.data(), cols_, band.data(), cols_, 0.0f, y + r0, rows_);
    }
    return;
  }
  thread_local quant::Q8KActivations xq;
  for (int64_t i = 0; i < n; ++i) {
    xq.quantize(x_in + i * cols_, cols_, krows_->group);
    quant::k_rows_matvec(*krows_, xq, y + i * rows_);
  }
}

// Q4_1's and Q5_1's dot type is Q8_1, whose fp16 block sums ggml multiplies
// by the weight blocks' mins (quant::q8_1_sum_rounding): without this term
// Q5_1 logits were off llama.cpp's by a median 5e-4.
void PackedMatrix::add_q8_1_sum_rounding(const float* x, const float* rounded, float* y, int64_t n) const {
  const int64_t blocks = cols_ / 32;
  thread_local std::vector<float> fix;
  fix.resize(size_t(n * blocks));
  quant::q8_1_sum_rounding(x, rounded, fix.data(), size_t(n * cols_));
  const float* f = fix.data();  // fix is this thread's: the workers below get its address
  const float* mins = block_mins_.data();
#pragma omp parallel for schedule(static) if (n * rows_ * blocks >= kernels::kMinParallelWork)
  for (int64_t r = 0; r < rows_; ++r)
    for (int64_t i = 0; i < n; ++i) {
      float add = 0;
      for (int64_t b = 0; b < blocks; ++b) add += mins[r * blocks + b] * f[i * blocks + b];
      y[i * rows_ + r] += add;
    }
}

void PackedMatrix::matmul(const float* x_in, float* y, int64_t n) const {
  if (kpacked_) return quant::k_packed_matmul(*kpacked_, x_in, n, y);
  if (krows_) return k_quant_matmul(x_in, y, n);
  if (packed_) {
    thread_local std::vector<uint8_t> xq;
    xq.resize(size_t(n * kernels::q8_0_row_bytes(cols_)));
    kernels::quantize_q8_0_activations(x_in, xq.data(), size_t(n * cols_));
    return kernels::q8_packed_matmul(*packed_, xq.data(), n, y);
  }
  if (type_ == TensorType::F32) {
    const float* x = round_activations(act_type_, x_in, n * cols_);
    const float* w = reinterpret_cast<const float*>(data_);
    if (n > 1 && rows_ * cols_ < kF32LargeMatrix) {  // s15's: as fast as any other way
      kernels::gemm(false, true, n, rows_, cols_, 1.0f, x, cols_, w, cols_, 0.0f, y, rows_);
    } else if (n >= kF32MatmulRows) {
      // Measured on a qwen3.5-0.8b prompt's shapes, 2 threads (Zen 4): the
      // primitive ran x W^T at 166-204 GFLOP/s from 64 to 128 rows, where
      // dnnl_sgemm ran 66-129 and W x^T 141-195; at 16 rows 107-164
      // against 22-34 and 107-162.
      kernels::gemm_matmul(false, true, n, rows_, cols_, 1.0f, x, cols_, w, cols_, 0.0f, y, rows_);
    } else if (n > 1) {
      // A few rows (batched decoding) through a matrix larger than L2:
      // y^T = W x^T, the weights as the GEMM's long side. Measured on the
      // qwen3-0.6b shape, 2 threads (Xeon, AVX-512): 8 sequences decoded
      // together 56.7 tokens/s this way, 38.4 as x W^T (13.1 one at a time).
      thread_local std::vector<float> yt;
      yt.resize(size_t(n * rows_));
      kernels::gemm(false, true, rows_, n, cols_, 1.0f, w, cols_, x, cols_, 0.0f, yt.data(), n);
      for (int64_t r = 0; r < rows_; ++r)
        for (int64_t i = 0; i < n; ++i) y[i * rows_ + r] = yt[size_t(r * n + i)];
    } else {
#pragma omp parallel for schedule(static) if (rows_ * cols_ >= kernels::kMinParallelWork)
      for (int64_t r = 0; r < rows_; ++r) y[r] = dot_f32(w + r * cols_, x, cols_);
    }
    if (!block_mins_.empty()) add_q8_1_sum_rounding(x_in, x, y, n);
    return;
  }
  const int64_t row_bytes = kernels::q8_0_row_bytes(cols_);
  thread_local std::vector<uint8_t> xq;
  xq.resize(size_t(n * row_bytes));
  const uint8_t* xqp = xq.data();
  if (n >= kGemmRows) {
    // A batch (a prompt): bands of W dequantized into a scratch and one float
    // GEMM each, on the activations as ggml rounds them (through Q8_0). Per
    // block this is d_w d_x sum(q_w q_x), as below, up to float rounding.
    thread_local std::vector<float> xr, band;
    xr.resize(size_t(n * cols_));
    kernels::round_q8_0_activations(x_in, xr.data(), size_t(n * cols_));
    const int64_t band_rows = std::max<int64_t>(1, (int64_t(1) << 18) / cols_);
    band.resize(size_t(std::min(band_rows, rows_) * cols_));
    kernels::quant_linear_forward(y, xr.data(), kernels::q8_0_rows(data_, rows_, cols_), n, band.data(), band_rows);
    return;
  }
  kernels::quantize_q8_0_activations(x_in, xq.data(), size_t(n * cols_));
#pragma omp parallel for schedule(static) if (n * rows_ * cols_ >= kernels::kMinParallelWork)
  for (int64_t r = 0; r < rows_; ++r)
    for (int64_t i = 0; i < n; ++i)
      y[i * rows_ + r] = kernels::dot_q8_0(data_ + r * row_bytes, xqp + i * row_bytes, cols_);
}

void PackedMatrix::row(int64_t r, float* out) const {
  if (kpacked_) return kpacked_->row(r, out);
  if (krows_) return krows_->dequantize(r, r + 1, out);
  if (packed_) return packed_->row(r, out);
  if (type_ == TensorType::F32) {
    std::memcpy(out, reinterpret_cast<const float*>(data_) + r * cols_, size_t(cols_) * 4);
    return;
  }
  const int64_t row_bytes = kernels::q8_0_row_bytes(cols_);
  kernels::dequantize_q8_0(data_ + r * row_bytes, out, size_t(cols_));
}

}  // namespace ggtrain::nn
