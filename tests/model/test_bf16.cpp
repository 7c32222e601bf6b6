// bf16 mixed precision (train.precision = bf16): the conversion and the bf16
// GEMM against float arithmetic on the same rounded inputs, the model's
// logits against the fp32 model's, and 300 steps of the tiny preset against
// the fp32 run's loss curve (smoothed losses within 2%); checkpoints stay F32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "gguf/reader.h"
#include "kernels/attention_bf16.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/number_formats.h"
#include "model/init.h"
#include "model/transformer.h"
#include "quant/type_traits.h"
#include "support/compare.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"
#include "util/rng.h"

using namespace ggtrain;
using kernels::bf16;
using test_support::compare;
using test_support::Comparison;
using test_support::differs_by_more_than;
using test_support::TempDir;
using test_support::Tolerance;
using test_support::within_abs;
using test_support::within_elementwise;
using test_support::within_rel_l2;
using test_support::within_rel_to_max;

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * (float(rng.next_u64() >> 40) / float(1 << 24) * 2.f - 1.f);
  return v;
}

std::vector<double> smoothed_losses(const std::string& run_dir, int window) {
  std::map<int64_t, double> by_step;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) by_step[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  std::vector<double> losses, out;
  for (const auto& [step, l] : by_step) losses.push_back(l);
  for (size_t i = 0; i + size_t(window) <= losses.size(); ++i) {
    double s = 0;
    for (int k = 0; k < window; ++k) s += losses[i + size_t(k)];
    out.push_back(s / window);
  }
  return out;
}

}  // namespace

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

// bf16 flash attention against the float kernel: same algorithm, products
// on bf16, so agreement to bf16 precision; small odd tiles reach the
// padding, real tiles several key blocks (T = 600, grouped queries).
TEST(Bf16, AttentionFollowsFloatAttention) {
  // (built without AVX512_BF16, the tile GEMM is a scalar loop with the same numbers)
  // (with `docs`, each row packs documents of 7 positions: per-document attention)
  for (auto [T, rows, cols, docs] : {std::tuple<int64_t, int64_t, int64_t, bool>{600, 64, 256, false},
                                     {29, 3, 5, false},
                                     {17, 4, 2, false},
                                     {29, 3, 5, true},
                                     {600, 64, 256, true}}) {
    SCOPED_TRACE(testing::Message() << "T " << T << " tiles " << rows << "x" << cols << (docs ? " documents" : ""));
    const int64_t B = 2, H = 4, KV = 2, hd = 16;
    std::vector<int32_t> doc_start(size_t(B * T));
    for (int64_t i = 0; i < B * T; ++i) doc_start[size_t(i)] = int32_t(i % T / 7 * 7);
    kernels::AttnShape s{B, T, H, KV, hd, rows, cols, docs ? doc_start.data() : nullptr};
    auto q = random_floats(size_t(B * T * H * hd), 21, 1.5f), k = random_floats(size_t(B * T * KV * hd), 22, 1.5f),
         v = random_floats(size_t(B * T * KV * hd), 23, 1.f), dout = random_floats(size_t(B * T * H * hd), 24, 1.f);
    const size_t per =
        size_t(std::max(kernels::attention_scratch_per_thread(s), kernels::attention_bf16_scratch_per_thread(s)));
    std::vector<float> scratch(per * size_t(omp_get_max_threads()));
    std::vector<float> o(q.size()), lse(size_t(B * H * T)), dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<float> o2(q.size()), lse2(lse.size()), dq2(q.size()), dk2(k.size()), dv2(v.size());
    kernels::attention_forward(o.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
    kernels::attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), o.data(), lse.data(),
                                q.data(), k.data(), v.data(), s);
    kernels::attention_forward_bf16(o2.data(), lse2.data(), scratch.data(), q.data(), k.data(), v.data(), s);
    kernels::attention_backward_bf16(dq2.data(), dk2.data(), dv2.data(), scratch.data(), dout.data(), o2.data(),
                                     lse2.data(), q.data(), k.data(), v.data(), s);
    const Comparison out = compare(o2, o);
    EXPECT_TRUE(within_rel_to_max(out, 2e-2)) << "out";
    EXPECT_TRUE(within_rel_to_max(compare(lse2, lse), 1e-2)) << "lse";
    EXPECT_TRUE(within_rel_to_max(compare(dq2, dq), 3e-2)) << "dq";
    EXPECT_TRUE(within_rel_to_max(compare(dk2, dk), 3e-2)) << "dk";
    EXPECT_TRUE(within_rel_to_max(compare(dv2, dv), 3e-2)) << "dv";
    EXPECT_TRUE(differs_by_more_than(out, 0.0)) << "it did run in bf16";
  }
}

TEST(Bf16, ModelLogitsAndGradientsFollowFp32) {
  model::LlamaConfig c;
  c.vocab = 300;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 160;
  c.ctx = 64;
  const int64_t B = 2, T = 64;
  model::ModelOptions o;
  o.precision = model::Precision::kBf16;
  o.logit_chunk_rows = 50;
  model::LlamaModel<float> fp(c, B, T), bf(c, B, T, {}, o);
  model::init_params(c, fp.layout(), fp.params(), 9, 0.1);
  std::copy(fp.params(), fp.params() + fp.n_params(), bf.params());
  std::vector<int32_t> in(size_t(B * T)), tg(size_t(B * T));
  for (size_t i = 0; i < in.size(); ++i) in[i] = int32_t((i * 37 + 1) % 300), tg[i] = int32_t((i * 11 + 5) % 300);
  fp.forward(in.data(), nullptr);
  bf.forward(in.data(), nullptr);
  const Comparison logits = compare(bf.logits(), fp.logits(), size_t(B * T * c.vocab));
  EXPECT_TRUE(within_rel_to_max(logits, 3e-2)) << "bf16 logits vs fp32";
  EXPECT_TRUE(differs_by_more_than(logits, 0.0)) << "it did run in bf16";
  const float lf = fp.forward(in.data(), tg.data()), lb = bf.forward(in.data(), tg.data());
  EXPECT_NEAR(lb, lf, 5e-3 * lf);
  fp.zero_grad();
  bf.zero_grad();
  fp.backward();
  bf.backward();
  for (const auto& t : fp.layout().tensors()) {  // relative L2 error of the tensor's gradient
    const Comparison g = compare(bf.grads() + t.offset, fp.grads() + t.offset, size_t(t.size));
    EXPECT_TRUE(within_rel_l2(g, 5e-2)) << t.name;
  }
}

TEST(Bf16, TinyLossCurveWithin2PercentOfFp32) {
  TempDir tmp("ggtrain_bf16");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 3000);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 300);
  c.train.warmup_steps = 20;
  c.train.eval_every = 100;
  c.checkpoint.every = 300;
  test_support::run_quiet(tmp / "fp32", c, false);
  c.train.precision = model::Precision::kBf16;
  const auto s = test_support::run_quiet(tmp / "bf16", c, false);
  EXPECT_EQ(s.last_step, 300);
  const auto a = smoothed_losses(tmp / "fp32", 20), b = smoothed_losses(tmp / "bf16", 20);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 281u);
  const Comparison losses = compare(b, a);
  std::printf("bf16 vs fp32, 300 tiny steps: worst smoothed (20-step mean) loss difference %.3f%%, "
              "final %.4f vs %.4f\n",
              100 * losses.max_elementwise_rel(), b.back(), a.back());
  EXPECT_TRUE(within_elementwise(losses, Tolerance{.rel = 0.02})) << "smoothed losses, bf16 vs fp32";
  EXPECT_LT(a.back(), 0.8 * a.front());  // it learned something
  gguf::GgufFile f(train::weights_path(tmp / "bf16", 300));
  for (const auto& t : f.tensors()) EXPECT_EQ(t.type, gguf::TensorType::F32) << t.name;
}
