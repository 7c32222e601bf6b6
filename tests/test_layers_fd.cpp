// Every layer's backward pass against central finite differences, in double
// precision. Each layer is probed with L = sum(out * probe) for a random probe.
#include <gtest/gtest.h>

#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
using ggtrain::test_support::dot;
using ggtrain::test_support::expect_grad_matches_fd;
using ggtrain::test_support::random_vector;
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

void check_attention(int64_t n_heads, int64_t n_kv_heads) {
  const int64_t B = 2, T = 5, hd = 4;
  AttnShape s{B, T, n_heads, n_kv_heads, hd};
  Vec q = random_vector(B * T * n_heads * hd, 11), k = random_vector(B * T * n_kv_heads * hd, 12),
      v = random_vector(B * T * n_kv_heads * hd, 13), probe = random_vector(B * T * n_heads * hd, 14);
  Vec att(B * n_heads * T * T);
  auto loss = [&] {
    Vec out(B * T * n_heads * hd);
    attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s);
    return dot(out, probe);
  };
  loss();
  Vec dq(q.size()), dk(k.size()), dv(v.size()), scratch(size_t(omp_get_max_threads() * attention_scratch_per_thread(T)));
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), probe.data(), q.data(),
                     k.data(), v.data(), att.data(), s);
  expect_grad_matches_fd(q, dq, loss, "attention dq");
  expect_grad_matches_fd(k, dk, loss, "attention dk");
  expect_grad_matches_fd(v, dv, loss, "attention dv");
}

TEST(LayerFd, AttentionMultiHead) { check_attention(3, 3); }
TEST(LayerFd, AttentionGroupedQuery) { check_attention(4, 2); }
TEST(LayerFd, AttentionMultiQuery) { check_attention(3, 1); }

TEST(LayerFd, AttentionIsCausal) {
  // Changing a future key or value must not change earlier outputs.
  const int64_t T = 4, hd = 2;
  AttnShape s{1, T, 1, 1, hd};
  Vec q = random_vector(T * hd, 15), k = random_vector(T * hd, 16), v = random_vector(T * hd, 17);
  Vec att(T * T), out1(T * hd), out2(T * hd);
  attention_forward(out1.data(), att.data(), q.data(), k.data(), v.data(), s);
  k[3 * hd] += 5.0;
  v[3 * hd + 1] -= 5.0;
  attention_forward(out2.data(), att.data(), q.data(), k.data(), v.data(), s);
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
