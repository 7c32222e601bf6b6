// Every layer's backward pass against central finite differences, in double
// precision. Each layer is probed with L = sum(out * probe) for a random probe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "corpus/batch_loader.h"
#include "kernels/attention.h"
#include "kernels/attention_reference.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/vexp.h"
#include "support/compare.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
namespace corpus = ggtrain::corpus;
using ggtrain::test_support::compare;
using ggtrain::test_support::compare_where;
using ggtrain::test_support::dot;
using ggtrain::test_support::expect_grad_matches_fd;
using ggtrain::test_support::random_vector;
using ggtrain::test_support::Tolerance;
using ggtrain::test_support::within_abs;
using ggtrain::test_support::within_elementwise;
using ggtrain::test_support::within_rel_to_max;
using Vec = std::vector<double>;

TEST(LayerFd, Linear) {
  const int64_t M = 5, K = 7, N = 4;
  Vec x = random_vector(M * K, 1), w = random_vector(N * K, 2), probe = random_vector(M * N, 3);
  auto loss = [&] {
    Vec y(M * N);
    linear_forward(y.data(), x.data(), w.data(), M, K, N);
    return dot(y, probe);
  };
  Vec dx(M * K, 0.0), dw(N * K, 0.0);
  linear_backward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), M, K, N, false);
  expect_grad_matches_fd(x, dx, loss, "linear dx");
  expect_grad_matches_fd(w, dw, loss, "linear dw");
}

TEST(LayerFd, RmsNorm) {
  const int64_t N = 4, C = 9;
  const double eps = 1e-5;
  Vec x = random_vector(N * C, 4), w = random_vector(C, 5), probe = random_vector(N * C, 6);
  for (auto& v : w) v += 1.0;
  auto loss = [&] {
    Vec y(N * C), r(N);
    rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, eps);
    return dot(y, probe);
  };
  Vec y(N * C), r(N), dx(N * C, 0.0), dw(C, 0.0);
  rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, eps);
  rmsnorm_backward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), r.data(), N, C);
  expect_grad_matches_fd(x, dx, loss, "rmsnorm dx");
  expect_grad_matches_fd(w, dw, loss, "rmsnorm dw");
}

TEST(LayerFd, RmsNormBackwardAccumulates) {
  const int64_t N = 2, C = 4;
  Vec x = random_vector(N * C, 7), w(C, 1.0), probe = random_vector(N * C, 8);
  Vec y(N * C), r(N), dx(N * C, 0.0), dx2(N * C, 1.5), dw(C, 0.0), dw2(C, 0.0);
  rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, 1e-5);
  rmsnorm_backward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), r.data(), N, C);
  rmsnorm_backward(dx2.data(), dw2.data(), probe.data(), x.data(), w.data(), r.data(), N, C);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_DOUBLE_EQ(dx2[i], dx[i] + 1.5);
}

TEST(LayerFd, Rope) {
  const int64_t B = 2, T = 5, H = 3, hd = 6;
  Vec cs(T * hd / 2), sn(T * hd / 2);
  rope_tables(cs.data(), sn.data(), T, hd, 10000.0);
  Vec x = random_vector(B * T * H * hd, 9), probe = random_vector(B * T * H * hd, 10);
  auto loss = [&] {
    Vec y = x;
    rope_forward(y.data(), cs.data(), sn.data(), B, T, H, hd);
    return dot(y, probe);
  };
  Vec dx = probe;
  rope_backward(dx.data(), cs.data(), sn.data(), B, T, H, hd);
  expect_grad_matches_fd(x, dx, loss, "rope dx");
}

TEST(LayerFd, RopeRotatesAdjacentPairsByPositionAngle) {
  // Position 3, pair i=1 of a head of 4: angle 3 * 10000^(-2/4) = 0.03.
  const int64_t T = 4, hd = 4;
  Vec cs(T * 2), sn(T * 2);
  rope_tables(cs.data(), sn.data(), T, hd, 10000.0);
  Vec x(T * hd, 0.0);
  x[3 * hd + 2] = 1.0;  // (x[2], x[3]) = (1, 0) at position 3
  rope_forward(x.data(), cs.data(), sn.data(), 1, T, 1, hd);
  EXPECT_NEAR(x[3 * hd + 2], std::cos(0.03), 1e-15);
  EXPECT_NEAR(x[3 * hd + 3], std::sin(0.03), 1e-15);
  EXPECT_EQ(x[3 * hd + 0], 0.0);
}

// Flash attention (kernels/attention.h) against finite differences. The
// tiles are shrunk (2 query rows x 3 keys) so that T = 7 reaches every case:
// several key blocks per row (online softmax rescaling), diagonal blocks,
// rows that see none of a block, a last tile and a last block cut short.
// `doc_start` (B x T), when given, packs several documents per row.
void check_attention(int64_t n_heads, int64_t n_kv_heads, int64_t tile_rows, int64_t tile_cols,
                     const std::vector<int32_t>& doc_start = {}) {
  const int64_t B = 2, T = 7, hd = 4;
  AttnShape s{B, T, n_heads, n_kv_heads, hd, tile_rows, tile_cols, doc_start.empty() ? nullptr : doc_start.data()};
  Vec q = random_vector(B * T * n_heads * hd, 11, 2.0), k = random_vector(B * T * n_kv_heads * hd, 12, 2.0),
      v = random_vector(B * T * n_kv_heads * hd, 13), probe = random_vector(B * T * n_heads * hd, 14);
  Vec lse(B * n_heads * T), scratch(size_t(omp_get_max_threads() * attention_scratch_per_thread(s)));
  Vec out(B * T * n_heads * hd);
  auto loss = [&] {
    attention_forward(out.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
    return dot(out, probe);
  };
  loss();
  Vec dq(q.size()), dk(k.size()), dv(v.size());
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), probe.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), s);
  expect_grad_matches_fd(q, dq, loss, "attention dq");
  expect_grad_matches_fd(k, dk, loss, "attention dk");
  expect_grad_matches_fd(v, dv, loss, "attention dv");
}

TEST(LayerFd, AttentionMultiHead) { check_attention(3, 3, 2, 3); }
TEST(LayerFd, AttentionGroupedQuery) { check_attention(4, 2, 2, 3); }
TEST(LayerFd, AttentionMultiQuery) { check_attention(3, 1, 2, 3); }
TEST(LayerFd, AttentionKeyBlocksNarrowerThanTiles) { check_attention(2, 1, 4, 2); }
TEST(LayerFd, AttentionOneTile) { check_attention(2, 2, 64, 256); }
TEST(LayerFd, AttentionWithinDocuments) {  // row 0: documents at 0, 3, 4; row 1: at 0, 6
  check_attention(4, 2, 2, 3, {0, 0, 0, 3, 4, 4, 4, 0, 0, 0, 0, 0, 0, 6});
}

// Packed documents (AttnShape::doc_start) give each document exactly what it
// gets alone: outputs, log-sum-exps and all three gradients, with tiles small
// enough that whole key blocks before a tile's documents are skipped.
TEST(LayerFd, PackedDocumentsEqualEachDocumentAlone) {
  const int64_t B = 2, T = 11, H = 4, KV = 2, hd = 4, qs = H * hd, ks = KV * hd;
  const std::vector<std::vector<int64_t>> docs{{0, 4, 5, 9}, {0, 8}};  // each row's document starts
  std::vector<int32_t> doc_start(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d : docs[size_t(b)])
        if (d <= t) doc_start[size_t(b * T + t)] = int32_t(d);
  AttnShape s{B, T, H, KV, hd, 2, 3, doc_start.data()};
  Vec q = random_vector(B * T * qs, 41, 2.0), k = random_vector(B * T * ks, 42, 2.0), v = random_vector(B * T * ks, 43),
      dout = random_vector(B * T * qs, 44);
  Vec scratch(size_t(omp_get_max_threads() * attention_scratch_per_thread(s)));
  Vec out(q.size()), lse(size_t(B * H * T)), dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward(out.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), s);
  Vec a_out(q.size()), a_lse(lse.size()), a_dq(q.size()), a_dk(k.size()), a_dv(v.size());
  for (int64_t b = 0; b < B; ++b)
    for (size_t i = 0; i < docs[size_t(b)].size(); ++i) {
      const int64_t d0 = docs[size_t(b)][i], d1 = i + 1 < docs[size_t(b)].size() ? docs[size_t(b)][i + 1] : T;
      AttnShape one{1, d1 - d0, H, KV, hd, 2, 3};
      const int64_t qo = (b * T + d0) * qs, ko = (b * T + d0) * ks;
      Vec l1(size_t(H * (d1 - d0)));
      attention_forward(a_out.data() + qo, l1.data(), scratch.data(), q.data() + qo, k.data() + ko, v.data() + ko, one);
      attention_backward(a_dq.data() + qo, a_dk.data() + ko, a_dv.data() + ko, scratch.data(), dout.data() + qo,
                         a_out.data() + qo, l1.data(), q.data() + qo, k.data() + ko, v.data() + ko, one);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < d1 - d0; ++t) a_lse[size_t((b * H + h) * T + d0 + t)] = l1[size_t(h * (d1 - d0) + t)];
    }
  EXPECT_TRUE(within_abs(compare(out, a_out), 1e-13)) << "out";
  EXPECT_TRUE(within_abs(compare(lse, a_lse), 1e-13)) << "lse";
  EXPECT_TRUE(within_abs(compare(dq, a_dq), 1e-13)) << "dq";
  EXPECT_TRUE(within_abs(compare(dk, a_dk), 1e-13)) << "dk";
  EXPECT_TRUE(within_abs(compare(dv, a_dv), 1e-13)) << "dv";
}

// The reference kernel (probabilities stored) keeps its own FD check.
TEST(LayerFd, ReferenceAttention) {
  const int64_t B = 2, T = 5, hd = 4, H = 4, KV = 2;
  AttnShape s{B, T, H, KV, hd};
  Vec q = random_vector(B * T * H * hd, 11), k = random_vector(B * T * KV * hd, 12),
      v = random_vector(B * T * KV * hd, 13), probe = random_vector(B * T * H * hd, 14);
  Vec att(B * H * T * T);
  auto loss = [&] {
    Vec out(B * T * H * hd);
    reference_attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s);
    return dot(out, probe);
  };
  loss();
  Vec dq(q.size()), dk(k.size()), dv(v.size()),
      scratch(size_t(omp_get_max_threads() * reference_attention_scratch_per_thread(T)));
  reference_attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), probe.data(), q.data(), k.data(),
                               v.data(), att.data(), s);
  expect_grad_matches_fd(q, dq, loss, "reference attention dq");
  expect_grad_matches_fd(k, dk, loss, "reference attention dk");
  expect_grad_matches_fd(v, dv, loss, "reference attention dv");
}

// float: flash attention with its real tiles against the reference kernel,
// at a length that needs several query tiles and key blocks (T = 600 > 256).
TEST(LayerFd, FlashAttentionMatchesReferenceInFloat) {
  const int64_t B = 1, T = 600, H = 4, KV = 2, hd = 16;
  AttnShape s{B, T, H, KV, hd};
  auto fvec = [](size_t n, uint64_t seed, double scale) {
    Vec d = random_vector(n, seed, scale);
    return std::vector<float>(d.begin(), d.end());
  };
  auto q = fvec(size_t(B * T * H * hd), 31, 2.0), k = fvec(size_t(B * T * KV * hd), 32, 2.0),
       v = fvec(size_t(B * T * KV * hd), 33, 1.0), dout = fvec(size_t(B * T * H * hd), 34, 1.0);
  std::vector<float> out(q.size()), ref_out(q.size()), lse(size_t(B * H * T)), att(size_t(B * H * T * T));
  std::vector<float> scratch(size_t(
      omp_get_max_threads() * std::max(attention_scratch_per_thread(s), reference_attention_scratch_per_thread(T))));
  attention_forward(out.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
  reference_attention_forward(ref_out.data(), att.data(), q.data(), k.data(), v.data(), s);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size()), rdq(q.size()), rdk(k.size()), rdv(v.size());
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), s);
  reference_attention_backward(rdq.data(), rdk.data(), rdv.data(), scratch.data(), dout.data(), q.data(), k.data(),
                               v.data(), att.data(), s);
  EXPECT_TRUE(within_rel_to_max(compare(out, ref_out), 1e-5)) << "out";
  EXPECT_TRUE(within_rel_to_max(compare(dq, rdq), 1e-4)) << "dq";
  EXPECT_TRUE(within_rel_to_max(compare(dk, rdk), 1e-4)) << "dk";
  EXPECT_TRUE(within_rel_to_max(compare(dv, rdv), 1e-4)) << "dv";
  // lse is log sum_s exp(scale q.k): the reference's probabilities sum to 1
  // after dividing by exp(lse), so check a row directly.
  const int64_t t = 417, h = 3;
  double sum = 0;
  for (int64_t j = 0; j <= t; ++j) {
    double dotp = 0;
    for (int64_t i = 0; i < hd; ++i)
      dotp += double(q[size_t(t * H * hd + h * hd + i)]) * k[size_t(j * KV * hd + (h / 2) * hd + i)];
    sum += std::exp(dotp / std::sqrt(double(hd)));
  }
  EXPECT_NEAR(lse[size_t(h * T + t)], std::log(sum), 1e-5 * std::fabs(std::log(sum)) + 1e-6);
}

TEST(LayerFd, AttentionIsCausal) {
  // Changing a future key or value must not change earlier outputs.
  const int64_t T = 4, hd = 2;
  AttnShape s{1, T, 1, 1, hd, 2, 2};
  Vec q = random_vector(T * hd, 15), k = random_vector(T * hd, 16), v = random_vector(T * hd, 17);
  Vec lse(T), out1(T * hd), out2(T * hd), scratch(size_t(omp_get_max_threads() * attention_scratch_per_thread(s)));
  attention_forward(out1.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
  k[3 * hd] += 5.0;
  v[3 * hd + 1] -= 5.0;
  attention_forward(out2.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), s);
  for (int64_t i = 0; i < 3 * hd; ++i) EXPECT_EQ(out1[i], out2[i]);
  EXPECT_NE(out1[3 * hd + 1], out2[3 * hd + 1]);
}

TEST(LayerFd, SwiGlu) {
  const int64_t n = 11;
  Vec gate = random_vector(n, 18, 3.0), up = random_vector(n, 19), probe = random_vector(n, 20);
  auto loss = [&] {
    Vec act(n);
    swiglu_forward(act.data(), gate.data(), up.data(), n);
    return dot(act, probe);
  };
  Vec dg(n), du(n);
  swiglu_backward(dg.data(), du.data(), probe.data(), gate.data(), up.data(), n);
  expect_grad_matches_fd(gate, dg, loss, "swiglu dgate");
  expect_grad_matches_fd(up, du, loss, "swiglu dup");
}

TEST(LayerFd, GeGlu) {
  const int64_t n = 11;
  Vec gate = random_vector(n, 18, 3.0), up = random_vector(n, 19), probe = random_vector(n, 20);
  auto loss = [&] {
    Vec act(n);
    geglu_forward(act.data(), gate.data(), up.data(), n);
    return dot(act, probe);
  };
  Vec dg(n), du(n);
  geglu_backward(dg.data(), du.data(), probe.data(), gate.data(), up.data(), n);
  expect_grad_matches_fd(gate, dg, loss, "geglu dgate");
  expect_grad_matches_fd(up, du, loss, "geglu dup");
  // The activation is GELU's tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x +
  // 0.044715 x^3))) (HF's gelu_pytorch_tanh, ggml_gelu), not erf GELU:
  // they differ by up to ~5e-4 at |x| ~ 2, far above this limit.
  Vec act(n);
  geglu_forward(act.data(), gate.data(), up.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i], u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    EXPECT_NEAR(act[i], 0.5 * x * (1.0 + std::tanh(u)) * up[i], 1e-14 * (1 + std::abs(act[i]))) << i;
  }
}

TEST(LayerFd, Embedding) {
  const int64_t N = 6, C = 3, V = 5;
  std::vector<int32_t> tokens{1, 4, 1, 0, 4, 4};
  Vec table = random_vector(V * C, 21), probe = random_vector(N * C, 22);
  auto loss = [&] {
    Vec x(N * C);
    embedding_forward(x.data(), tokens.data(), table.data(), N, C);
    return dot(x, probe);
  };
  Vec dtable(V * C, 0.0);
  embedding_backward(dtable.data(), probe.data(), tokens.data(), N, C);
  expect_grad_matches_fd(table, dtable, loss, "embedding dtable");
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dtable[2 * C + c], 0.0);  // token 2 unused
}

TEST(LayerFd, CrossEntropy) {
  const int64_t N = 4, V = 7;
  std::vector<int32_t> targets{0, 6, 3, 3};
  Vec logits = random_vector(N * V, 23, 4.0);
  auto loss = [&] {
    Vec losses(N), lse(N);
    cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
    double s = 0;
    for (double l : losses) s += l;
    return s / double(N);
  };
  Vec losses(N), lse(N), d = logits;
  cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward_inplace(d.data(), lse.data(), targets.data(), N, V, 1.0 / double(N));
  expect_grad_matches_fd(logits, d, loss, "cross-entropy dlogits");
}

TEST(LayerFd, CrossEntropyFusedMatchesForwardThenBackward) {
  const int64_t N = 5, V = 37;
  std::vector<int32_t> targets{0, 36, 3, 3, 20};
  Vec logits = random_vector(N * V, 24, 6.0);
  Vec losses(N), lse(N), d = logits, fl(N), flse(N), fused = logits;
  cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward_inplace(d.data(), lse.data(), targets.data(), N, V, 0.25);
  cross_entropy_fused(fl.data(), flse.data(), fused.data(), targets.data(), N, V, 0.25);
  EXPECT_TRUE(within_abs(compare(fl, losses), 1e-14)) << "losses";
  EXPECT_TRUE(within_abs(compare(fused, d), 1e-15)) << "dlogits";
}

// A position whose target is kNoTarget adds no loss, its logits get no
// gradient, and the others' gradients are those of a batch without it.
TEST(LayerFd, CrossEntropySkipsPositionsWithoutTarget) {
  const int64_t N = 4, V = 9;
  const std::vector<int32_t> targets{2, corpus::kNoTarget, 8, corpus::kNoTarget};
  Vec logits = random_vector(N * V, 25, 4.0);
  Vec losses(N), lse(N), fused = logits, d = logits, fl(N), flse(N);
  cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward_inplace(d.data(), lse.data(), targets.data(), N, V, 0.5);
  cross_entropy_fused(fl.data(), flse.data(), fused.data(), targets.data(), N, V, 0.5);
  const std::vector<int32_t> kept{2, 8};
  Vec kept_logits(2 * V), kl(2), klse(2);
  std::copy(logits.begin(), logits.begin() + V, kept_logits.begin());
  std::copy(logits.begin() + 2 * V, logits.begin() + 3 * V, kept_logits.begin() + V);
  cross_entropy_fused(kl.data(), klse.data(), kept_logits.data(), kept.data(), 2, V, 0.5);
  for (int64_t n : {1, 3}) {
    EXPECT_EQ(losses[size_t(n)], 0.0);
    EXPECT_EQ(fl[size_t(n)], 0.0);
    for (int64_t i = 0; i < V; ++i) {
      EXPECT_EQ(d[size_t(n * V + i)], 0.0);
      EXPECT_EQ(fused[size_t(n * V + i)], 0.0);
    }
  }
  for (int64_t j = 0; j < 2; ++j) {
    const int64_t n = 2 * j;
    EXPECT_NEAR(fl[size_t(n)], kl[size_t(j)], 1e-14);
    for (int64_t i = 0; i < V; ++i) {
      EXPECT_NEAR(fused[size_t(n * V + i)], kept_logits[size_t(j * V + i)], 1e-15);
      EXPECT_NEAR(d[size_t(n * V + i)], kept_logits[size_t(j * V + i)], 1e-15);
    }
  }
}

// The AVX-512 exp of the softmax loops against the C library's, in float.
TEST(LayerFd, VectorExpMatchesLibm) {
  std::vector<float> x;
  for (int i = -2000; i <= 1000; ++i) x.push_back(float(i) * 0.0437f);  // [-87.4, 43.7]
  x.push_back(-1e30f);
  x.push_back(-INFINITY);
  const float shift = 1.5f;
  std::vector<float> y = x;
  const float sum = exp_shift_sum(y.data(), int64_t(y.size()), shift);
  std::vector<double> ref(x.size());
  double ref_sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ref[i] = std::exp(double(x[i] - shift));  // the float difference the kernel sees
    ref_sum += ref[i];
  }
  // Relative error down to 1e-37 (normal floats); below it, only that the result is as small.
  auto normal = [&](size_t i) { return ref[i] > 1e-37; };
  const auto exp_normal = compare_where(y.data(), ref.data(), ref.size(), normal);
  EXPECT_TRUE(within_elementwise(exp_normal, Tolerance{.rel = 4 * 1.2e-7})) << "exp, a few float ulp";
  for (size_t i = 0; i < x.size(); ++i) {
    if (normal(i)) continue;
    EXPECT_LE(y[i], 1e-37f) << x[i];
  }
  EXPECT_NEAR(sum, ref_sum, 1e-6 * ref_sum);
  EXPECT_NEAR(sum_exp_shift(x.data(), int64_t(x.size()), shift), ref_sum, 1e-6 * ref_sum);
}

// The vectorised float (and bf16-output) paths of SwiGLU and RMSNorm against
// the double loops, over lengths that leave a tail after the 16-lane body.
TEST(LayerFd, FloatSwiGluAndRmsNormMatchDouble) {
  const int64_t n = 16 * 7 + 5, C = 37;
  Vec gate = random_vector(n, 41, 12.0), up = random_vector(n, 42), dact = random_vector(n, 43);
  Vec act(n), dg(n), du(n);
  swiglu_forward(act.data(), gate.data(), up.data(), n);
  swiglu_backward(dg.data(), du.data(), dact.data(), gate.data(), up.data(), n);
  auto f = [](const Vec& v) { return std::vector<float>(v.begin(), v.end()); };
  auto gf = f(gate), uf = f(up), df = f(dact);
  std::vector<float> actf(n), dgf(n), duf(n);
  std::vector<bf16> acth(n), dgh(n), duh(n);
  swiglu_forward(actf.data(), gf.data(), uf.data(), n);
  swiglu_backward(dgf.data(), duf.data(), df.data(), gf.data(), uf.data(), n);
  swiglu_forward(acth.data(), gf.data(), uf.data(), n);
  swiglu_backward(dgh.data(), duh.data(), df.data(), gf.data(), uf.data(), n);
  const Tolerance in_float{.abs = 1e-5, .rel = 1e-5}, in_bf16{.abs = 1e-6, .rel = 1e-2};
  auto widen = [](const std::vector<bf16>& h) {
    std::vector<float> v(h.size());
    for (size_t i = 0; i < h.size(); ++i) v[i] = from_bf16(h[i]);
    return v;
  };
  EXPECT_TRUE(within_elementwise(compare(actf, act), in_float)) << "swiglu act";
  EXPECT_TRUE(within_elementwise(compare(dgf, dg), in_float)) << "swiglu dgate";
  EXPECT_TRUE(within_elementwise(compare(duf, du), in_float)) << "swiglu dup";
  EXPECT_TRUE(within_elementwise(compare(widen(acth), act), in_bf16)) << "bf16 swiglu act";
  EXPECT_TRUE(within_elementwise(compare(widen(dgh), dg), in_bf16)) << "bf16 swiglu dgate";
  EXPECT_TRUE(within_elementwise(compare(widen(duh), du), in_bf16)) << "bf16 swiglu dup";
  const int64_t N = 3;
  Vec x = random_vector(N * C, 44, 3.0), w = random_vector(C, 45), y(N * C), r(N);
  rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, 1e-5);
  auto xf = f(x), wf = f(w);
  std::vector<float> yf(N * C), rf(N);
  std::vector<bf16> yh(N * C);
  rmsnorm_forward(yf.data(), rf.data(), xf.data(), wf.data(), N, C, 1e-5f);
  rmsnorm_forward(yh.data(), rf.data(), xf.data(), wf.data(), N, C, 1e-5f);
  EXPECT_TRUE(within_elementwise(compare(yf, y), in_float)) << "rmsnorm y";
  for (int64_t i = 0; i < N * C; ++i) EXPECT_EQ(yh[i], to_bf16(yf[i])) << i;  // the same float, rounded once
}

// GeGLU's vectorised float (and bf16-output) path against the double loop,
// including gates far out on both sides (the sigmoid's exp overflowing).
TEST(LayerFd, FloatGeGluMatchesDouble) {
  const int64_t n = 16 * 7 + 5;
  Vec gate = random_vector(n, 51, 6.0), up = random_vector(n, 52), dact = random_vector(n, 53);
  gate[3] = 40, gate[4] = -40, gate[20] = 1e-7;
  Vec act(n), dg(n), du(n);
  geglu_forward(act.data(), gate.data(), up.data(), n);
  geglu_backward(dg.data(), du.data(), dact.data(), gate.data(), up.data(), n);
  auto f = [](const Vec& v) { return std::vector<float>(v.begin(), v.end()); };
  auto gf = f(gate), uf = f(up), df = f(dact);
  std::vector<float> actf(n), dgf(n), duf(n);
  std::vector<bf16> acth(n);
  geglu_forward(actf.data(), gf.data(), uf.data(), n);
  geglu_backward(dgf.data(), duf.data(), df.data(), gf.data(), uf.data(), n);
  geglu_forward(acth.data(), gf.data(), uf.data(), n);
  const Tolerance in_float{.abs = 1e-5, .rel = 1e-5};
  EXPECT_TRUE(within_elementwise(compare(actf, act), in_float)) << "geglu act";
  EXPECT_TRUE(within_elementwise(compare(dgf, dg), in_float)) << "geglu dgate";
  EXPECT_TRUE(within_elementwise(compare(duf, du), in_float)) << "geglu dup";
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(acth[i], to_bf16(actf[i])) << i;  // the same float, rounded once
}

// The fused residual add + RMSNorm equals the two kernels one after the other.
TEST(LayerFd, ResidualRmsNormEqualsAddThenNorm) {
  const int64_t N = 5, C = 37;
  Vec x = random_vector(N * C, 51, 2.0), res = random_vector(N * C, 52), w = random_vector(C, 53);
  Vec sum(N * C), y(N * C), r(N), fx = x, fy(N * C), fr(N);
  residual_forward(sum.data(), x.data(), res.data(), N * C);
  rmsnorm_forward(y.data(), r.data(), sum.data(), w.data(), N, C, 1e-5);
  residual_rmsnorm_forward(fx.data(), fy.data(), fr.data(), res.data(), w.data(), N, C, 1e-5);
  EXPECT_TRUE(within_abs(compare(fx, sum), 0.0)) << "residual sum";
  EXPECT_TRUE(within_abs(compare(fy, y), 1e-15)) << "normed";
  EXPECT_TRUE(within_abs(compare(fr, r), 1e-15)) << "rms";
}
