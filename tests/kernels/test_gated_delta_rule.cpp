// kernels/gated_delta_rule.h (the recurrent form: decoding) and
// kernels/gated_delta_rule_chunked.h (the chunked form: training), each:
// the forward against the rule written out with a full state history, the
// backward against central finite differences in double (every input,
// across chunk checkpoints and a document start), the float path against
// the double one. Then checkpoint spacing, and the two forms against each
// other on windows of several chunks.
#include "kernels/gated_delta_rule.h"

#include "kernels/gated_delta_rule_chunked.h"

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

enum class Form { recurrent, chunked };

template <typename T>
void run_forward(Form f, T* o, T* cp, const T* q, const T* k, const T* v, const T* g, const T* beta,
                 const DeltaRuleShape& s) {
  if (f == Form::chunked) ggtrain::kernels::delta_rule_chunked_forward(o, cp, q, k, v, g, beta, s);
  else ggtrain::kernels::delta_rule_forward(o, cp, q, k, v, g, beta, s);
}

template <typename T>
void run_backward(Form f, T* dq, T* dk, T* dv, T* dg, T* db, T* scratch, const T* d_o, const T* cp, const T* q,
                  const T* k, const T* v, const T* g, const T* beta, const DeltaRuleShape& s) {
  if (f == Form::chunked)
    ggtrain::kernels::delta_rule_chunked_backward(dq, dk, dv, dg, db, scratch, d_o, cp, q, k, v, g, beta, s);
  else ggtrain::kernels::delta_rule_backward(dq, dk, dv, dg, db, scratch, d_o, cp, q, k, v, g, beta, s);
}

std::vector<double> forward(const Inputs& in, const DeltaRuleShape& s, std::vector<double>* checkpoints = nullptr,
                            Form f = Form::recurrent) {
  std::vector<double> o(size_t(s.batch * s.seq * s.n_v_heads * s.d));
  if (checkpoints) checkpoints->assign(size_t(s.checkpoint_floats()), 0.0);
  run_forward(f, o.data(), checkpoints ? checkpoints->data() : nullptr, in.q.data(), in.k.data(), in.v.data(),
              in.g.data(), in.beta.data(), s);
  return o;
}

// dq, dk, dv, dg, dbeta of sum(w * o), end to end in one vector.
std::vector<double> gradients(const Inputs& in, const std::vector<double>& w, const DeltaRuleShape& s, Form f) {
  std::vector<double> cp;
  forward(in, s, &cp, f);
  std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dg(in.g.size()), db(in.beta.size()),
      scratch(size_t(ggtrain::kernels::delta_rule_backward_scratch(s)));
  run_backward(f, dq.data(), dk.data(), dv.data(), dg.data(), db.data(), scratch.data(), w.data(), cp.data(),
               in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), s);
  for (const auto* x : {&dk, &dv, &dg, &db}) dq.insert(dq.end(), x->begin(), x->end());
  return dq;
}

class GatedDeltaRule : public ::testing::TestWithParam<Form> {};

}  // namespace

// The rule as the header states it, one full state per position, against
// the kernel (which keeps one state and checkpoints).
TEST_P(GatedDeltaRule, ForwardIsTheRuleWrittenOut) {
  const auto ds = two_documents();
  const DeltaRuleShape s = test_shape(ds);
  const Inputs in = random_inputs(s);
  const auto o = forward(in, s, nullptr, GetParam());
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
  EXPECT_TRUE(ggtrain::test_support::differs_by_more_than(compare(forward(in, one_doc, nullptr, GetParam()), o), 1e-3));
}

// d(sum w * o) / d(each input) against central differences.
TEST_P(GatedDeltaRule, BackwardFollowsFiniteDifferences) {
  const auto ds = two_documents();
  const DeltaRuleShape s = test_shape(ds);
  Inputs in = random_inputs(s);
  const auto w = random_vector(size_t(s.batch * s.seq * s.n_v_heads * s.d), 9, 1.0);
  auto loss = [&] {
    const auto o = forward(in, s, nullptr, GetParam());
    double acc = 0;
    for (size_t i = 0; i < o.size(); ++i) acc += w[i] * o[i];
    return acc;
  };
  const auto all = gradients(in, w, s, GetParam());
  size_t at = 0;
  auto take = [&](size_t n) {
    at += n;
    return std::vector<double>(all.begin() + long(at - n), all.begin() + long(at));
  };
  const auto dq = take(in.q.size()), dk = take(in.k.size()), dv = take(in.v.size()), dg = take(in.g.size()),
             db = take(in.beta.size());
  ggtrain::test_support::expect_grad_matches_fd(in.q, dq, loss, "q", 1e-8, 1e-6);
  ggtrain::test_support::expect_grad_matches_fd(in.k, dk, loss, "k", 1e-8, 1e-6);
  ggtrain::test_support::expect_grad_matches_fd(in.v, dv, loss, "v", 1e-8, 1e-6);
  ggtrain::test_support::expect_grad_matches_fd(in.g, dg, loss, "g", 1e-8, 1e-6);
  ggtrain::test_support::expect_grad_matches_fd(in.beta, db, loss, "beta", 1e-8, 1e-6);
}

// Checkpoints every 4 positions or once: the recurrent form's outputs and
// gradients are the same to the bit (backward recomputes each chunk with
// the forward's own steps).
TEST(GatedDeltaRule, RecurrentCheckpointSpacingChangesNothing) {
  const auto ds = two_documents();
  DeltaRuleShape s4 = test_shape(ds), s64 = s4;
  s64.chunk = 64;
  const Inputs in = random_inputs(s4);
  const auto w = random_vector(size_t(s4.batch * s4.seq * s4.n_v_heads * s4.d), 9, 1.0);
  EXPECT_EQ(forward(in, s4), forward(in, s64));
  EXPECT_EQ(gradients(in, w, s4, Form::recurrent), gradients(in, w, s64, Form::recurrent));
}

// Float against double: outputs and gradients, each form against its own
// double path. Measured on the Xeon (v4): recurrent outputs 1.7e-7, worst
// gradient 1.4e-7 (of the largest); chunked 1.9-2.1e-7 and 0.96-1.45e-6 on
// the v2, v3 and v4 builds; limits 1e-5.
TEST_P(GatedDeltaRule, FloatFollowsDouble) {
  const auto ds = two_documents();
  DeltaRuleShape s = test_shape(ds);
  const Inputs in = random_inputs(s);
  auto to_f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  const auto qf = to_f(in.q), kf = to_f(in.k), vf = to_f(in.v), gf = to_f(in.g), bf = to_f(in.beta);
  std::vector<float> of(size_t(s.batch * s.seq * s.n_v_heads * s.d)), cpf(size_t(s.checkpoint_floats()));
  run_forward(GetParam(), of.data(), cpf.data(), qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), s);
  const auto od = forward(in, s, nullptr, GetParam());
  const auto cmp_o = compare(std::vector<double>(of.begin(), of.end()), od);
  const auto w = random_vector(od.size(), 9, 1.0);
  const auto wf = to_f(w);
  std::vector<float> dqf(qf.size()), dkf(kf.size()), dvf(vf.size()), dgf(gf.size()), dbf(bf.size()),
      sf(size_t(ggtrain::kernels::delta_rule_backward_scratch(s)));
  run_backward(GetParam(), dqf.data(), dkf.data(), dvf.data(), dgf.data(), dbf.data(), sf.data(), wf.data(), cpf.data(),
               qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), s);
  const auto want = gradients(in, w, s, GetParam());
  size_t at = 0;
  double worst = 0;
  const char* names[] = {"dq", "dk", "dv", "dg", "dbeta"};
  int i = 0;
  for (const auto* f : {&dqf, &dkf, &dvf, &dgf, &dbf}) {
    const std::vector<double> d(want.begin() + long(at), want.begin() + long(at + f->size()));
    at += f->size();
    const auto c = compare(std::vector<double>(f->begin(), f->end()), d);
    EXPECT_TRUE(within_rel_to_max(c, 1e-5)) << names[i++];
    worst = std::max(worst, c.rel_to_max());
  }
  std::printf("float vs double: outputs %.2e, worst gradient %.2e (of max)\n", cmp_o.rel_to_max(), worst);
  EXPECT_TRUE(within_rel_to_max(cmp_o, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Forms, GatedDeltaRule, ::testing::Values(Form::recurrent, Form::chunked),
                         [](const auto& info) { return info.param == Form::chunked ? "chunked" : "recurrent"; });

namespace {

// Two rows of 150 positions with heads of 16, chunks of 32 (150 is not a
// multiple); row 1 holds documents starting at 40 (inside a chunk) and 64
// (on a chunk's first position), row 0 one document.
DeltaRuleShape long_shape(std::vector<int32_t>& doc_start) {
  doc_start.assign(300, 0);
  for (int t = 40; t < 150; ++t) doc_start[size_t(150 + t)] = t < 64 ? 40 : 64;
  DeltaRuleShape s;
  s.batch = 2;
  s.seq = 150;
  s.n_v_heads = 4;
  s.n_k_heads = 2;
  s.d = 16;
  s.chunk = 32;
  s.doc_start = doc_start.data();
  return s;
}

// Keys L2-normed, as the layer feeds them (the chunked form's triangular
// solve is well conditioned for those, as the recurrence is stable).
Inputs normed_keys(Inputs in, int64_t d) {
  for (size_t r = 0; r < in.k.size(); r += size_t(d)) {
    double n = 0;
    for (int64_t i = 0; i < d; ++i) n += in.k[r + size_t(i)] * in.k[r + size_t(i)];
    for (int64_t i = 0; i < d; ++i) in.k[r + size_t(i)] /= std::sqrt(n);
  }
  return in;
}

}  // namespace

// The chunked form computes the recurrent one, in double: outputs and
// gradients over five chunks, two document starts, a short last chunk.
// Measured 3.1e-16 and 4.4e-16; limit 1e-12. Control: the chunked form with its
// document starts dropped.
TEST(GatedDeltaRuleForms, ChunkedIsTheRecurrentFormOverManyChunks) {
  std::vector<int32_t> ds;
  const DeltaRuleShape s = long_shape(ds);
  const Inputs in = normed_keys(random_inputs(s), s.d);
  const auto w = random_vector(size_t(s.batch * s.seq * s.n_v_heads * s.d), 9, 1.0);
  const auto o_rec = forward(in, s, nullptr, Form::recurrent), o_chk = forward(in, s, nullptr, Form::chunked);
  const auto g_rec = gradients(in, w, s, Form::recurrent), g_chk = gradients(in, w, s, Form::chunked);
  const auto co = compare(o_chk, o_rec), cg = compare(g_chk, g_rec);
  std::printf("chunked vs recurrent (double): outputs %.2e, gradients %.2e (of max)\n", co.rel_to_max(),
              cg.rel_to_max());
  EXPECT_TRUE(within_rel_to_max(co, 1e-12));
  EXPECT_TRUE(within_rel_to_max(cg, 1e-12));
  DeltaRuleShape one_doc = s;
  one_doc.doc_start = nullptr;
  EXPECT_TRUE(
      ggtrain::test_support::differs_by_more_than(compare(forward(in, one_doc, nullptr, Form::chunked), o_rec), 1e-3));
}

// Decays strong enough that e^G underflows within a chunk (g = -30 at every
// third position): the chunked form still computes the recurrent one, in
// float, with no NaN or Inf. Measured 1.4-1.5e-7 (of the largest output);
// limit 2e-6. Exponents taken as G_t - G_s (two long sums) measured 6.3e-6.
TEST(GatedDeltaRuleForms, StrongDecayUnderflowsToZeroNotNaN) {
  std::vector<int32_t> ds;
  const DeltaRuleShape s = long_shape(ds);
  Inputs in = normed_keys(random_inputs(s), s.d);
  for (size_t i = 0; i < in.g.size(); ++i) in.g[i] = i % 3 == 0 ? -30.0 : in.g[i];
  auto to_f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  const auto qf = to_f(in.q), kf = to_f(in.k), vf = to_f(in.v), gf = to_f(in.g), bf = to_f(in.beta);
  std::vector<float> of(size_t(s.batch * s.seq * s.n_v_heads * s.d));
  run_forward(Form::chunked, of.data(), static_cast<float*>(nullptr), qf.data(), kf.data(), vf.data(), gf.data(),
              bf.data(), s);
  const auto c = compare(std::vector<double>(of.begin(), of.end()), forward(in, s, nullptr, Form::recurrent));
  std::printf("strong decay, chunked float vs recurrent double: %.2e (of max)\n", c.rel_to_max());
  EXPECT_TRUE(within_rel_to_max(c, 2e-6));
}
