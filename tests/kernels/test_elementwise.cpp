// kernels/elementwise: SwiGLU, GeGLU and the embedding against central finite
// differences in double (L = sum(out * probe) for a random probe), and the
// vectorised float and bf16 paths against the double loops.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "support/compare.h"
#include "support/fd_check.h"

using namespace ggtrain::kernels;
using ggtrain::test_support::compare;
using ggtrain::test_support::dot;
using ggtrain::test_support::expect_grad_matches_fd;
using ggtrain::test_support::random_vector;
using ggtrain::test_support::Tolerance;
using ggtrain::test_support::within_elementwise;
using Vec = std::vector<double>;

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
