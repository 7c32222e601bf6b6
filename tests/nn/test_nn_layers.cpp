// nn::Linear and nn::Embedding, the layers training and the decoder share,
// in each of their weight forms against independent truth: the layer's
// definition written out as loops in double, and central finite
// differences in double for the backward pass with a LoRA branch.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/number_formats.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/packed_matrix.h"
#include "support/compare.h"
#include "support/fd_check.h"
#include "util/error.h"

namespace {

using namespace ggtrain;
using test_support::compare;
using test_support::differs_by_more_than;
using test_support::dot;
using test_support::expect_grad_matches_fd;
using test_support::random_vector;
using test_support::within_rel_to_max;
using Vec = std::vector<double>;

// y[M, N] = x W^T + s (x A^T) B^T, W [N, K], A [r, K], B [N, r], from the
// definition (r = 0: no branch).
Vec definition(const Vec& x, const Vec& w, const Vec& a, const Vec& b, int64_t M, int64_t K, int64_t N, int64_t r,
               double s) {
  Vec y(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x[size_t(m * K + k)] * w[size_t(n * K + k)];
      for (int64_t j = 0; j < r; ++j) {
        double u = 0;
        for (int64_t k = 0; k < K; ++k) u += x[size_t(m * K + k)] * a[size_t(j * K + k)];
        acc += s * u * b[size_t(n * r + j)];
      }
      y[size_t(m * N + n)] = acc;
    }
  return y;
}

std::vector<float> as_float(const Vec& v) { return {v.begin(), v.end()}; }
Vec as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Random Q8_0 rows [rows, cols] and their values as floats.
struct Q8Matrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  Q8Matrix(int64_t rows, int64_t cols, uint64_t seed) : bytes(size_t(rows * kernels::q8_0_row_bytes(cols))) {
    const auto w = as_float(random_vector(size_t(rows * cols), seed));
    kernels::quantize_q8_0(w.data(), bytes.data(), w.size());
    values.resize(w.size());
    kernels::dequantize_q8_0(bytes.data(), values.data(), values.size());
  }
};

TEST(NnLinear, DenseWithLoraIsItsDefinitionAndItsGradientsTheFiniteDifferences) {
  const int64_t M = 5, K = 8, N = 6, r = 3;
  const double s = 0.75;
  Vec x = random_vector(size_t(M * K), 1), w = random_vector(size_t(N * K), 2), a = random_vector(size_t(r * K), 3),
      b = random_vector(size_t(N * r), 4), probe = random_vector(size_t(M * N), 5);
  Vec gw(w.size(), 0.0), ga(a.size(), 0.0), gb(b.size(), 0.0), u(size_t(M * r)), du(size_t(M * r));
  auto layer = nn::Linear<double>::dense(w.data(), gw.data(), N, K);
  layer.add_lora({a.data(), b.data(), r, s, u.data(), ga.data(), gb.data(), du.data()});
  auto forward = [&] {
    Vec y(size_t(M * N));
    layer.forward(y.data(), {x.data(), nullptr}, M);
    return y;
  };
  const Vec y = forward();
  // Measured 1.8e-16 (summation order); the branch alone moves y by 2.3.
  EXPECT_TRUE(within_rel_to_max(compare(y, definition(x, w, a, b, M, K, N, r, s)), 1e-14));
  EXPECT_TRUE(differs_by_more_than(compare(y, definition(x, w, a, b, M, K, N, 0, s)), 1e-2)) << "the branch counts";

  Vec dx(x.size(), 0.0);
  layer.backward_base(dx.data(), {probe.data(), nullptr}, {x.data(), nullptr}, M, false);
  layer.backward_lora(dx.data(), {probe.data(), nullptr}, {x.data(), nullptr}, M);
  auto loss = [&] { return dot(forward(), probe); };
  expect_grad_matches_fd(x, dx, loss, "dL/dx");
  expect_grad_matches_fd(w, gw, loss, "dL/dW");
  expect_grad_matches_fd(a, ga, loss, "dL/dA");
  expect_grad_matches_fd(b, gb, loss, "dL/dB");
}

TEST(NnLinear, FrozenDenseWeightGetsNoGradientAndDxAccumulates) {
  const int64_t M = 3, K = 4, N = 5;
  Vec x = random_vector(size_t(M * K), 6), w = random_vector(size_t(N * K), 7), dy = random_vector(size_t(M * N), 8);
  const auto layer = nn::Linear<double>::dense(w.data(), nullptr, N, K);
  Vec dx(x.size(), 1.0), ref(x.size(), 1.0);
  layer.backward_base(dx.data(), {dy.data(), nullptr}, {x.data(), nullptr}, M, /*accumulate=*/true);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) ref[size_t(m * K + k)] += dy[size_t(m * N + n)] * w[size_t(n * K + k)];
  EXPECT_TRUE(within_rel_to_max(compare(dx, ref), 1e-14));
}

// A held matrix dequantizes bands of rows into its scratch: 40 rows through
// a scratch of 16 rows is three bands, the last one short.
TEST(NnLinear, HeldQ8RowsComputeAsTheirValues) {
  const int64_t M = 9, K = 64, N = 40;
  const Q8Matrix q(N, K, 9);
  const auto x = as_float(random_vector(size_t(M * K), 10)), dy = as_float(random_vector(size_t(M * N), 11));
  std::vector<float> scratch(size_t(16 * K));
  const auto held = nn::Linear<float>::held(kernels::q8_0_rows(q.bytes.data(), N, K), scratch.data(), 16 * K);
  ASSERT_EQ(held.n_out(), N);
  ASSERT_EQ(held.n_in(), K);
  std::vector<float> y(size_t(M * N)), dx(size_t(M * K));
  held.forward(y.data(), {const_cast<float*>(x.data()), nullptr}, M);
  held.backward_base(dx.data(), {const_cast<float*>(dy.data()), nullptr}, {}, M, false);
  const Vec values = as_double(q.values);
  const Vec ref = definition(as_double(x), values, {}, {}, M, K, N, 0, 0);
  // Measured 9.2e-8 and 1.2e-7 (float sums of 64 and 40 terms); limit 8x.
  // The control below differs by 3.2e-2.
  EXPECT_TRUE(within_rel_to_max(compare(y, ref), 1e-6));
  Vec dx_ref(size_t(M * K), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        dx_ref[size_t(m * K + k)] += double(dy[size_t(m * N + n)]) * values[size_t(n * K + k)];
  EXPECT_TRUE(within_rel_to_max(compare(dx, dx_ref), 1e-6));
  // Control: the weights before quantization give another product.
  const Vec unrounded = definition(as_double(x), random_vector(size_t(N * K), 9), {}, {}, M, K, N, 0, 0);
  EXPECT_TRUE(differs_by_more_than(compare(y, unrounded), 1e-4));
}

// The decoder's form: a packed F32 matrix (read in place) with two adapters,
// for one token and for a prompt.
TEST(NnLinear, PackedMatrixWithTwoAdapters) {
  const int64_t K = 32, N = 24, r1 = 2, r2 = 4;
  const auto w = as_float(random_vector(size_t(N * K), 12));
  const auto a1 = as_float(random_vector(size_t(r1 * K), 13)), b1 = as_float(random_vector(size_t(N * r1), 14));
  const auto a2 = as_float(random_vector(size_t(r2 * K), 15)), b2 = as_float(random_vector(size_t(N * r2), 16));
  auto layer = nn::Linear<float>::packed(std::make_shared<const nn::PackedMatrix>(w.data(), N, K));
  std::vector<float> u(size_t(7 * r2));
  layer.add_lora({a1.data(), b1.data(), r1, 0.5f, u.data()});
  layer.add_lora({a2.data(), b2.data(), r2, -1.25f, u.data()});
  for (int64_t M : {1, 7}) {
    auto x = as_float(random_vector(size_t(M * K), 17 + uint64_t(M)));
    std::vector<float> y(size_t(M * N));
    layer.forward(y.data(), {x.data(), nullptr}, M);
    const Vec xd = as_double(x), wd = as_double(w);
    Vec ref = definition(xd, wd, as_double(a1), as_double(b1), M, K, N, r1, 0.5);
    const Vec second = definition(xd, Vec(size_t(N * K), 0.0), as_double(a2), as_double(b2), M, K, N, r2, -1.25);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += second[i];
    // Measured 9.2e-8 (M = 1) and 1.0e-7 (M = 7); limit 10x.
    EXPECT_TRUE(within_rel_to_max(compare(y, ref), 1e-6)) << "M = " << M;
    EXPECT_TRUE(
        differs_by_more_than(compare(y, definition(xd, wd, as_double(a1), as_double(b1), M, K, N, r1, 0.5)), 1e-3))
        << "the second adapter counts";
  }
  std::vector<float> x(static_cast<size_t>(K)), dy(static_cast<size_t>(N)), dx(static_cast<size_t>(K));
  EXPECT_THROW(layer.backward_base(dx.data(), {dy.data(), nullptr}, {x.data(), nullptr}, 1, false), Error);
}

TEST(NnLinear, QuantizedFormsNeedFloatLayers) {
  const Q8Matrix q(4, 32, 18);
  EXPECT_THROW(nn::Linear<double>::held(kernels::q8_0_rows(q.bytes.data(), 4, 32), nullptr, 128), Error);
  std::vector<float> small(16);
  EXPECT_THROW(nn::Linear<float>::held(kernels::q8_0_rows(q.bytes.data(), 4, 32), small.data(), 16), Error);
}

TEST(NnEmbedding, EveryFormGathersItsRowsAndDenseScattersGradients) {
  const int64_t V = 10, C = 32;
  const std::vector<int32_t> tokens = {3, 0, 3, 9, 3};
  const auto N = int64_t(tokens.size());
  const Q8Matrix q(V, C, 19);
  const Vec table = as_double(q.values);
  auto gathered = [&](const auto& emb) {
    std::vector<typename std::decay_t<decltype(emb)>::Value> x(size_t(N * C));
    emb.forward(x.data(), tokens.data(), N);
    return x;
  };
  Vec ref(size_t(N * C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) ref[size_t(n * C + c)] = table[size_t(tokens[size_t(n)] * C + c)];
  Vec grad(table.size(), 0.0);
  const auto dense = nn::Embedding<double>::dense(table.data(), grad.data(), V, C);
  EXPECT_EQ(gathered(dense), ref);
  EXPECT_EQ(as_double(gathered(nn::Embedding<float>::held(kernels::q8_0_rows(q.bytes.data(), V, C)))), ref);
  EXPECT_EQ(as_double(gathered(nn::Embedding<float>::packed(
                std::make_shared<const nn::PackedMatrix>(gguf::TensorType::Q8_0, q.bytes.data(), V, C)))),
            ref);
  EXPECT_EQ(as_double(gathered(
                nn::Embedding<float>::packed(std::make_shared<const nn::PackedMatrix>(q.values.data(), V, C)))),
            ref);

  const Vec dx = random_vector(size_t(N * C), 20);
  dense.backward(dx.data(), tokens.data(), N);
  Vec grad_ref(table.size(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) grad_ref[size_t(tokens[size_t(n)] * C + c)] += dx[size_t(n * C + c)];
  EXPECT_TRUE(within_rel_to_max(compare(grad, grad_ref), 1e-15));
  const auto frozen = nn::Embedding<double>::dense(table.data(), nullptr, V, C);
  EXPECT_FALSE(frozen.trainable());
  frozen.backward(dx.data(), tokens.data(), N);  // nothing to write
}

}  // namespace
