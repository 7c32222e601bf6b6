// nn::PackedMatrix, a weight as the decoder multiplies it, for every
// quantized type it reads, against ggml's arithmetic written out in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include <omp.h>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/number_formats.h"
#include "nn/packed_matrix.h"
#include "quant/gguf_floats.h"
#include "support/temp_dir.h"

using namespace ggtrain;
using test_support::TempDir;

// A quantized weight as the decoder multiplies it: each type's dequantized
// rows times the activations rounded to its dot type (Q8_0 for the 32-block
// types, Q8_K for the K-quants), computed here in double from the decoded
// blocks: what ggml's integer dot products compute, up to float summation.
// The activations are rounded here too, as ggml defines its quantizers (not
// with the library's rounding). A batch of 3 takes the decode kernels, one
// of 9 the prompt path.
class QuantizedMatrix : public ::testing::TestWithParam<int64_t> {};
INSTANTIATE_TEST_SUITE_P(Decoder, QuantizedMatrix, ::testing::Values(3, 9));
// What ggml's Q5_1 x Q8_1 dot adds beyond the dequantized weights times the
// rounded activations: each Q8_1 block carries s = fp16(d * sum of its
// quants), d = amax / 127 before rounding, and the weight block's min m
// multiplies s where the rounded activations would give fp16(d) * sum:
// sum over blocks of m * (s - fp16(d) * sum).
namespace {
bool is_k_quant(gguf::TensorType t) {
  return t == gguf::TensorType::Q4_K || t == gguf::TensorType::Q5_K || t == gguf::TensorType::Q6_K;
}

// x as ggml's integer dot products see it, from ggml-quants.c's definitions.
// Q8_0 (and Q8_1's quants): blocks of 32, d = amax / 127, q = round(x / d),
// the value q * fp16(d). Q8_K: blocks of 256, the element of largest |x|
// (with its sign) sets iscale = -127 / max, q = min(127, nearest(iscale x)),
// the value q / iscale (a float d). Ties between two integers round
// differently in ggml's reference (roundf) and SIMD (to even) quantizers;
// `ties` counts them, so the test can show its data has none.
std::vector<float> rounded_as_ggml(gguf::TensorType weight, const float* x, int64_t n, int* ties) {
  std::vector<float> out(static_cast<size_t>(n));
  const int64_t block = is_k_quant(weight) ? 256 : 32;
  for (int64_t b = 0; b < n; b += block) {
    float amax = 0, max = 0;
    for (int64_t j = b; j < b + block; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    float multiplier = 0, value_of_one = 0;
    if (is_k_quant(weight)) {
      const float iscale = amax != 0 ? -127.f / max : 0.f;
      multiplier = iscale;
      value_of_one = amax != 0 ? 1 / iscale : 0.f;
    } else {
      const float d = amax / 127.f;
      multiplier = d != 0 ? 1.0f / d : 0.f;
      value_of_one = kernels::fp16_to_fp32(kernels::fp32_to_fp16(d));
    }
    for (int64_t j = b; j < b + block; ++j) {
      const float v = x[j] * multiplier;
      if (std::fabs(v - std::trunc(v)) == 0.5f) ++*ties;
      const float q = std::min(127.f, std::nearbyint(v));
      out[size_t(j)] = q * value_of_one;
    }
  }
  return out;
}

double q8_1_sum_term(const uint8_t* q5_1, const float* x, int64_t row, int64_t cols) {
  double term = 0;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0;
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += int(std::round(xb[j] * id));
    const uint8_t* block = q5_1 + (row * cols / 32 + b) * 24;  // d, m (fp16 each), high bits, low nibbles
    uint16_t m16;
    std::memcpy(&m16, block + 2, 2);
    const double s = kernels::fp16_to_fp32(kernels::fp32_to_fp16(d * float(sum)));
    term += double(kernels::fp16_to_fp32(m16)) * (s - double(kernels::fp16_to_fp32(kernels::fp32_to_fp16(d))) * sum);
  }
  return term;
}
}  // namespace

TEST_P(QuantizedMatrix, MultipliesAsGgmlDoes) {
  TempDir tmp;
  constexpr int64_t kRows = 21, kCols = 512;  // 21: a partial group of 16 rows in the VNNI layout
  const int64_t kBatch = GetParam();
  std::vector<float> w(size_t(kRows * kCols)), x(size_t(kBatch * kCols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37 * double(i)) * 0.05f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11 * double(i)) * 2.0f;
  for (auto type : {gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q5_0, gguf::TensorType::Q5_1,
                    gguf::TensorType::Q4_K, gguf::TensorType::Q5_K, gguf::TensorType::Q6_K}) {
    gguf::GgufWriter wr;
    quant::add_float_tensor(wr, "m.weight", type, {uint64_t(kCols), uint64_t(kRows)}, w.data());
    wr.write(tmp / "m.gguf");
    gguf::GgufFile f(tmp / "m.gguf");
    const nn::PackedMatrix m(f, f.tensor("m.weight"));
    std::vector<float> y(size_t(kBatch * kRows));
    m.matmul(x.data(), y.data(), kBatch);
    const std::vector<float> wq = quant::tensor_floats(f, f.tensor("m.weight"));
    int ties = 0;
    const std::vector<float> xr = rounded_as_ggml(type, x.data(), int64_t(x.size()), &ties);
    ASSERT_EQ(ties, 0) << "an activation halfway between two quants: ggml's paths disagree on it";
    for (int64_t i = 0; i < kBatch; ++i)
      for (int64_t r = 0; r < kRows; ++r) {
        double want = 0;
        for (int64_t k = 0; k < kCols; ++k) want += double(wq[size_t(r * kCols + k)]) * xr[size_t(i * kCols + k)];
        if (type == gguf::TensorType::Q5_1)
          want += q8_1_sum_term(f.tensor("m.weight").data, &x[size_t(i * kCols)], r, kCols);
        const float got = y[size_t(i * kRows + r)];
        ASSERT_TRUE(std::isfinite(got));
        ASSERT_NEAR(got, want, 1e-5 * (1 + std::fabs(want))) << gguf::type_name(type) << " row " << r;
      }
    // Rows as the decoder reads them (token embeddings): ggml's dequantized values exactly.
    std::vector<float> row(static_cast<size_t>(kCols));
    for (int64_t r = 0; r < kRows; ++r) {
      m.row(r, row.data());
      for (int64_t k = 0; k < kCols; ++k)
        ASSERT_EQ(row[size_t(k)], wq[size_t(r * kCols + k)])
            << gguf::type_name(type) << " row " << r << " column " << k;
    }
    // and the rounding is really there: unrounded activations give other values
    double plain = 0;
    for (int64_t k = 0; k < kCols; ++k) plain += double(wq[size_t(k)]) * x[size_t(k)];
    EXPECT_GT(std::fabs(plain - y[0]), 1e-6) << gguf::type_name(type);
  }
}

// F32 weights take four paths by batch rows and matrix size: one row a
// dot per weight row; a small matrix x W^T by sgemm; through a matrix of
// 2^20 elements or more, fewer than 16 rows the GEMM y^T = W x^T (then
// transposed back), 16 or more oneDNN's matmul primitive. Each against the
// product in double, at 3 threads, across the boundaries. Measured worst
// relative error (|got - want| / (1 + |want|)): 6.6e-7 on an Intel Xeon
// (AVX-512, no AMX), before the primitive; with it, on Zen 4, 8.2e-7 to
// 1.1e-6 across the levels; limit 1e-5. Reading the transposed result
// back untransposed gives 0.16.
TEST(F32Matrix, EveryBatchSizeAgreesWithDouble) {
  omp_set_num_threads(3);
  double worst = 0;
  for (const auto [rows, cols] : {std::pair<int64_t, int64_t>{1030, 1024}, {300, 256}}) {
    std::vector<float> w(size_t(rows * cols));
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(std::sin(0.37 * double(i)) * 0.05);
    const nn::PackedMatrix m(w.data(), rows, cols);
    for (int64_t n : {1, 2, 3, 8, 15, 16, 63, 64, 70}) {
      std::vector<float> x(size_t(n * cols)), y(size_t(n * rows), std::nanf(""));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::cos(0.11 * double(i)) * 2.0);
      m.matmul(x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          double want = 0;
          for (int64_t k = 0; k < cols; ++k) want += double(w[size_t(r * cols + k)]) * x[size_t(i * cols + k)];
          const double got = y[size_t(i * rows + r)];
          ASSERT_TRUE(std::isfinite(got)) << rows << "x" << cols << ", " << n << " rows: row " << i << ", " << r;
          const double err = std::fabs(got - want) / (1 + std::fabs(want));
          worst = std::max(worst, err);
          ASSERT_LE(err, 1e-5) << rows << "x" << cols << ", " << n << " rows: row " << i << ", " << r;
        }
    }
  }
  std::printf("F32 matrix products, worst relative error %.2e\n", worst);
  omp_set_num_threads(1);
}
