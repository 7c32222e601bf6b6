// bf16 kernels against float arithmetic on the same rounded inputs: the
// conversion (round to nearest even, as GGUF's), oneDNN's bf16 GEMM and the
// attention tiles' bf16 GEMM.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/number_formats.h"
#include "kernels/tile_gemm_bf16.h"
#include "support/compare.h"
#include "support/random_floats.h"

using namespace ggtrain;
using kernels::bf16;
using test_support::compare;
using test_support::random_floats;
using test_support::within_abs;

TEST(Bf16, ConversionRoundsToNearestEvenLikeGguf) {
  auto x = random_floats(1000, 3, 100.f);
  x.push_back(1.0f + 0x1.0p-8f);  // halfway, rounds to even (down)
  x.push_back(1.0f + 3 * 0x1.0p-8f);  // halfway, rounds to even (up)
  x.push_back(-0.0f);
  x.push_back(3.0e38f);
  std::vector<bf16> vec(x.size());
  kernels::to_bf16(vec.data(), x.data(), int64_t(x.size()));  // vectorised path and tail
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(vec[i], kernels::fp32_to_bf16(x[i])) << x[i];
    EXPECT_EQ(kernels::to_bf16(x[i]), kernels::fp32_to_bf16(x[i])) << x[i];
  }
  EXPECT_EQ(kernels::from_bf16(kernels::fp32_to_bf16(1.5f)), 1.5f);
}

TEST(Bf16, GemmMatchesFloatGemmOnRoundedInputs) {
  // (without AVX512_BF16 oneDNN emulates bf16: slower, the same numbers)
  const int64_t M = 37, N = 29, K = 70;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {0.f, 1.f}) {
        SCOPED_TRACE(testing::Message() << "ta " << ta << " tb " << tb << " beta " << beta);
        auto a = random_floats(size_t(M * K), 5, 1.f), b = random_floats(size_t(K * N), 6, 1.f);
        auto c0 = random_floats(size_t(M * N), 7, 1.f);
        std::vector<bf16> ah(a.size()), bh(b.size());
        kernels::to_bf16(ah.data(), a.data(), int64_t(a.size()));
        kernels::to_bf16(bh.data(), b.data(), int64_t(b.size()));
        std::vector<float> ar(a.size()), br(b.size());
        for (size_t i = 0; i < a.size(); ++i) ar[i] = kernels::from_bf16(ah[i]);
        for (size_t i = 0; i < b.size(); ++i) br[i] = kernels::from_bf16(bh[i]);
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        auto c = c0, ref = c0;
        kernels::gemm_bf16(ta, tb, M, N, K, 0.5f, ah.data(), lda, bh.data(), ldb, beta, c.data(), N);
        kernels::gemm(ta, tb, M, N, K, 0.5f, ar.data(), lda, br.data(), ldb, beta, ref.data(), N);
        // products of bf16 are exact in float; only the sums' order differs
        EXPECT_TRUE(within_abs(compare(c, ref), 1e-4)) << "bf16 GEMM vs float GEMM";
      }
}

// The attention tiles' bf16 GEMM against float arithmetic on the same
// rounded inputs: row-major and transposed A, odd sizes (zero padding), all
// vector widths and row remainders, accumulate or not.
TEST(Bf16, TileGemmMatchesFloatOnRoundedInputs) {
  for (auto [M, N, K] :
       {std::tuple<int64_t, int64_t, int64_t>{37, 29, 70}, {64, 256, 48}, {7, 100, 5}, {13, 64, 2}, {1, 33, 1}}) {
    for (int transposed_a = 0; transposed_a < 2; ++transposed_a)
      for (int acc = 0; acc < 2; ++acc) {
        SCOPED_TRACE(testing::Message() << M << "x" << N << "x" << K << " tA " << transposed_a << " acc " << acc);
        auto a = random_floats(size_t(M * K), 11, 1.f), b = random_floats(size_t(K * N), 12, 1.f);
        for (auto& x : a) x = kernels::from_bf16(kernels::to_bf16(x));
        for (auto& x : b) x = kernels::from_bf16(kernels::to_bf16(x));
        const int64_t K2 = (K + 1) / 2;
        std::vector<uint32_t> bp(size_t(K2 * N)), ap(size_t(std::max(M * K2, K2 * M)));
        kernels::pack_row_pairs(bp.data(), N, b.data(), N, K, N);
        std::vector<float> at(size_t(K * M));  // A^T [K, M]
        for (int64_t i = 0; i < M; ++i)
          for (int64_t k = 0; k < K; ++k) at[size_t(k * M + i)] = a[size_t(i * K + k)];
        int64_t sam, sak;
        if (transposed_a) {  // pairs along A's columns, packed as for a B operand
          kernels::pack_row_pairs(ap.data(), M, at.data(), M, K, M);
          sam = 1, sak = M;
        } else {
          std::vector<bf16> rows(size_t(M * 2 * K2));
          kernels::pack_rows(rows.data(), 2 * K2, a.data(), K, M, K);
          std::memcpy(ap.data(), rows.data(), rows.size() * 2);
          sam = K2, sak = 1;
        }
        auto c = random_floats(size_t(M * N), 13, 1.f), ref = c;
        kernels::tile_gemm_bf16(M, N, K2, 0.5f, ap.data(), sam, sak, bp.data(), N, acc, c.data(), N);
        kernels::gemm(false, false, M, N, K, 0.5f, a.data(), K, b.data(), N, acc ? 1.f : 0.f, ref.data(), N);
        EXPECT_TRUE(within_abs(compare(c, ref), 1e-4)) << "bf16 tile GEMM vs float GEMM";
      }
  }
}
