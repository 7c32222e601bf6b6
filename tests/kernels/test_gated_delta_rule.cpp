// kernels/gated_delta_rule.h: the backward against central finite
// differences in double (every input, across chunk checkpoints and a
// document start), checkpoint spacing that changes nothing, the float path
// against the double one, and the forward against the rule written out with
// a full state history.
#include "kernels/gated_delta_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/compare.h"
#include "support/fd_check.h"

using ggtrain::kernels::DeltaRuleShape;
using ggtrain::test_support::compare;
using ggtrain::test_support::random_vector;
using ggtrain::test_support::within_rel_to_max;

namespace {

// Two rows of 11 positions, checkpoints every 4 (11 is not a multiple), 4
// value heads over 2 key heads, heads of 3; row 1 starts a second document at 6.
DeltaRuleShape test_shape(const std::vector<int32_t>& doc_start) {
  DeltaRuleShape s;
  s.batch = 2;
  s.seq = 11;
  s.n_v_heads = 4;
  s.n_k_heads = 2;
  s.d = 3;
  s.chunk = 4;
  s.doc_start = doc_start.data();
  return s;
}

std::vector<int32_t> two_documents() {
  std::vector<int32_t> ds(22, 0);
  for (int t = 6; t < 11; ++t) ds[size_t(11 + t)] = 6;
  return ds;
}

struct Inputs {
  std::vector<double> q, k, v, g, beta;
};

Inputs random_inputs(const DeltaRuleShape& s) {
  const auto bt = size_t(s.batch * s.seq);
  Inputs in{random_vector(bt * size_t(s.n_k_heads * s.d), 1, 0.8),
            random_vector(bt * size_t(s.n_k_heads * s.d), 2, 0.8),
            random_vector(bt * size_t(s.n_v_heads * s.d), 3, 1.0), random_vector(bt * size_t(s.n_v_heads), 4, 0.5),
            random_vector(bt * size_t(s.n_v_heads), 5, 0.5)};
  for (auto& x : in.g) x = -0.3 + 0.25 * x;  // log-decays below 0, as softplus * -exp(A) makes them
  for (auto& x : in.beta) x = 0.5 + 0.4 * x;  // sigmoids
  return in;
}

std::vector<double> forward(const Inputs& in, const DeltaRuleShape& s, std::vector<double>* checkpoints = nullptr) {
  std::vector<double> o(size_t(s.batch * s.seq * s.n_v_heads * s.d));
  if (checkpoints) checkpoints->assign(size_t(s.checkpoint_floats()), 0.0);
  ggtrain::kernels::delta_rule_forward(o.data(), checkpoints ? checkpoints->data() : nullptr, in.q.data(), in.k.data(),
                                       in.v.data(), in.g.data(), in.beta.data(), s);
  return o;
}

}  // namespace

// The rule as the header states it, one full state per position, against
// the kernel (which keeps one state and checkpoints).
TEST(GatedDeltaRule, ForwardIsTheRuleWrittenOut) {
  const auto ds = two_documents();
  const DeltaRuleShape s = test_shape(ds);
  const Inputs in = random_inputs(s);
  const auto o = forward(in, s);
  const int64_t H = s.n_v_heads, HK = s.n_k_heads, d = s.d;
  std::vector<double> want(o.size());
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<std::vector<double>> S(size_t(s.seq + 1), std::vector<double>(size_t(d * d), 0.0));
      for (int64_t t = 0; t < s.seq; ++t) {
        const int64_t r = b * s.seq + t, hk = h % HK;
        const bool fresh = t == 0 || ds[size_t(r)] == t;
        auto& cur = S[size_t(t + 1)];
        for (int64_t x = 0; x < d * d; ++x)
          cur[size_t(x)] = fresh ? 0.0 : std::exp(in.g[size_t(r * H + h)]) * S[size_t(t)][size_t(x)];
        for (int64_t j = 0; j < d; ++j) {
          double m = 0;
          for (int64_t i = 0; i < d; ++i) m += cur[size_t(i * d + j)] * in.k[size_t((r * HK + hk) * d + i)];
          const double delta = in.beta[size_t(r * H + h)] * (in.v[size_t((r * H + h) * d + j)] - m);
          for (int64_t i = 0; i < d; ++i) cur[size_t(i * d + j)] += in.k[size_t((r * HK + hk) * d + i)] * delta;
        }
        for (int64_t j = 0; j < d; ++j) {
          double acc = 0;
          for (int64_t i = 0; i < d; ++i) acc += cur[size_t(i * d + j)] * in.q[size_t((r * HK + hk) * d + i)];
          want[size_t((r * H + h) * d + j)] = acc / std::sqrt(double(d));
        }
      }
    }
  EXPECT_TRUE(within_rel_to_max(compare(o, want), 1e-14));
  // and the document start mattered: without it row 1's second document differs
  DeltaRuleShape one_doc = s;
  one_doc.doc_start = nullptr;
  EXPECT_TRUE(ggtrain::test_support::differs_by_more_than(compare(forward(in, one_doc), o), 1e-3));
}

// d(sum w * o) / d(each input) against central differences.
TEST(GatedDeltaRule, BackwardFollowsFiniteDifferences) {
  const auto ds = two_documents();
  const DeltaRuleShape s = test_shape(ds);
  Inputs in = random_inputs(s);
  const auto w = random_vector(size_t(s.batch * s.seq * s.n_v_heads * s.d), 9, 1.0);
  auto loss = [&] {
    const auto o = forward(in, s);
    double acc = 0;
    for (size_t i = 0; i < o.size(); ++i) acc += w[i] * o[i];
    return acc;
  };
  std::vector<double> cp;
  forward(in, s, &cp);
  std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dg(in.g.size()), db(in.beta.size()),
      scratch(size_t(ggtrain::kernels::delta_rule_backward_scratch(s)));
  ggtrain::kernels::delta_rule_backward(dq.data(), dk.data(), dv.data(), dg.data(), db.data(), scratch.data(), w.data(),
                                        cp.data(), in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                        s);
  ggtrain::test_support::expect_grad_matches_fd(in.q, dq, loss, "q", 1e-8, 1e-6);
  ggtrain::test_support::expect_grad_matches_fd(in.k, dk, loss, "k", 1e-8, 1e-6);
  ggtrain::test_support::expect_grad_matches_fd(in.v, dv, loss, "v", 1e-8, 1e-6);
  ggtrain::test_support::expect_grad_matches_fd(in.g, dg, loss, "g", 1e-8, 1e-6);
  ggtrain::test_support::expect_grad_matches_fd(in.beta, db, loss, "beta", 1e-8, 1e-6);
}

// Checkpoints every 4 positions or once: the same outputs and gradients to
// the bit (backward recomputes each chunk with the forward's own steps).
TEST(GatedDeltaRule, CheckpointSpacingChangesNothing) {
  const auto ds = two_documents();
  DeltaRuleShape s4 = test_shape(ds), s64 = s4;
  s64.chunk = 64;
  const Inputs in = random_inputs(s4);
  const auto w = random_vector(size_t(s4.batch * s4.seq * s4.n_v_heads * s4.d), 9, 1.0);
  auto grads = [&](const DeltaRuleShape& s) {
    std::vector<double> cp;
    forward(in, s, &cp);
    std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dg(in.g.size()), db(in.beta.size()),
        scratch(size_t(ggtrain::kernels::delta_rule_backward_scratch(s)));
    ggtrain::kernels::delta_rule_backward(dq.data(), dk.data(), dv.data(), dg.data(), db.data(), scratch.data(),
                                          w.data(), cp.data(), in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                          in.beta.data(), s);
    dq.insert(dq.end(), dk.begin(), dk.end());
    dq.insert(dq.end(), dv.begin(), dv.end());
    dq.insert(dq.end(), dg.begin(), dg.end());
    dq.insert(dq.end(), db.begin(), db.end());
    return dq;
  };
  EXPECT_EQ(forward(in, s4), forward(in, s64));
  EXPECT_EQ(grads(s4), grads(s64));
}

// Float against double: outputs and gradients. Measured on the Xeon (v4):
// outputs 1.7e-7, worst gradient 1.4e-7 (of the largest); limits 1e-5 for both.
TEST(GatedDeltaRule, FloatFollowsDouble) {
  const auto ds = two_documents();
  DeltaRuleShape s = test_shape(ds);
  const Inputs in = random_inputs(s);
  auto to_f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  const auto qf = to_f(in.q), kf = to_f(in.k), vf = to_f(in.v), gf = to_f(in.g), bf = to_f(in.beta);
  std::vector<float> of(size_t(s.batch * s.seq * s.n_v_heads * s.d)), cpf(size_t(s.checkpoint_floats()));
  ggtrain::kernels::delta_rule_forward(of.data(), cpf.data(), qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), s);
  std::vector<double> cp;
  const auto od = forward(in, s, &cp);
  const auto cmp_o = compare(std::vector<double>(of.begin(), of.end()), od);
  const auto w = random_vector(od.size(), 9, 1.0);
  const auto wf = to_f(w);
  std::vector<float> dqf(qf.size()), dkf(kf.size()), dvf(vf.size()), dgf(gf.size()), dbf(bf.size()),
      sf(size_t(ggtrain::kernels::delta_rule_backward_scratch(s)));
  ggtrain::kernels::delta_rule_backward(dqf.data(), dkf.data(), dvf.data(), dgf.data(), dbf.data(), sf.data(),
                                        wf.data(), cpf.data(), qf.data(), kf.data(), vf.data(), gf.data(), bf.data(),
                                        s);
  std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dg(in.g.size()), db(in.beta.size()),
      sd(size_t(ggtrain::kernels::delta_rule_backward_scratch(s)));
  ggtrain::kernels::delta_rule_backward(dq.data(), dk.data(), dv.data(), dg.data(), db.data(), sd.data(), w.data(),
                                        cp.data(), in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                        s);
  double worst = 0;
  const char* names[] = {"dq", "dk", "dv", "dg", "dbeta"};
  int i = 0;
  for (const auto& [f, d] : {std::pair{&dqf, &dq}, {&dkf, &dk}, {&dvf, &dv}, {&dgf, &dg}, {&dbf, &db}}) {
    const auto c = compare(std::vector<double>(f->begin(), f->end()), *d);
    EXPECT_TRUE(within_rel_to_max(c, 1e-5)) << names[i++];
    worst = std::max(worst, c.rel_to_max());
  }
  std::printf("float vs double: outputs %.2e, worst gradient %.2e (of max)\n", cmp_o.rel_to_max(), worst);
  EXPECT_TRUE(within_rel_to_max(cmp_o, 1e-5));
}
