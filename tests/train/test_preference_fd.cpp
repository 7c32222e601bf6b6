// The model's backward from per-position weights (what preference tuning
// takes) against central finite differences in double of each objective
// over whole answers: two rows, each packing a pair (chosen answer, then
// rejected answer) as two documents after a prompt-like stretch without loss.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "corpus/batch_loader.h"
#include "kernels/cross_entropy.h"
#include "model/transformer.h"
#include "support/fd_check.h"
#include "train/preference_loss.h"

namespace ggtrain::train {
namespace {

using model::Config;
using model::Transformer;

Config tiny() {
  Config c;
  c.vocab = 11;
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 12;
  c.ctx = 10;
  c.tied = false;
  c.rope_freq_base = 100.0;
  c.rms_eps = 1e-5;
  return c;
}

constexpr int64_t B = 2, T = 10;

// Row layout: documents [0, 5) chosen and [5, 10) rejected; in each, the
// first two targets are the prompt's (no loss).
struct Batch {
  std::vector<int32_t> inputs, targets, doc_start;
};

Batch make_batch(int64_t vocab) {
  Batch b;
  for (int64_t i = 0; i < B * T; ++i) {
    const int64_t pos = i % T;
    b.inputs.push_back(int32_t((i * 5 + 2) % vocab));
    const bool prompt = pos % 5 < 2, last = pos % 5 == 4;  // a document's last input predicts nothing of its own
    b.targets.push_back(prompt || last ? corpus::kNoTarget : int32_t((i * 3 + 1) % vocab));
    b.doc_start.push_back(int32_t(pos < 5 ? 0 : 5));
  }
  return b;
}

struct Span {
  int64_t begin, end;
};

double answer_logp(const double* token_loss, const std::vector<int32_t>& targets, Span s, int64_t* n) {
  double sum = 0;
  *n = 0;
  for (int64_t i = s.begin; i < s.end; ++i)
    if (targets[size_t(i)] != corpus::kNoTarget) {
      sum -= token_loss[i];
      ++*n;
    }
  return sum;
}

// Mean pair loss over the batch's pairs (+ ORPO's chosen NLL), and when
// `d` is given, d(objective)/d(token loss) per position.
double objective(Objective o, const PreferenceParams& p, const double* token_loss, const double* ref,
                 const std::vector<int32_t>& targets, std::vector<double>* d) {
  double total = 0, nll = 0;
  int64_t chosen_tokens = 0;
  if (d) d->assign(size_t(B * T), 0.0);
  std::vector<std::pair<Span, double>> chosen_spans;
  for (int64_t b = 0; b < B; ++b) {
    const Span c{b * T, b * T + 5}, r{b * T + 5, b * T + 10};
    PairLogps x;
    x.chosen = answer_logp(token_loss, targets, c, &x.n_chosen);
    x.rejected = answer_logp(token_loss, targets, r, &x.n_rejected);
    int64_t unused = 0;
    x.ref_chosen = answer_logp(ref, targets, c, &unused);
    x.ref_rejected = answer_logp(ref, targets, r, &unused);
    const PairLoss l = pair_loss(o, p, x);
    total += l.loss / double(B);
    nll -= x.chosen;
    chosen_tokens += x.n_chosen;
    if (d)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t at = b * T + i;
        if (targets[size_t(at)] == corpus::kNoTarget) continue;
        (*d)[size_t(at)] = -(i < 5 ? l.d_chosen : l.d_rejected) / double(B);
      }
  }
  if (adds_chosen_nll(o)) {
    total += nll / double(chosen_tokens);
    if (d)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < 5; ++i)
          if (targets[size_t(b * T + i)] != corpus::kNoTarget) (*d)[size_t(b * T + i)] += 1.0 / double(chosen_tokens);
  }
  return total;
}

void check(Objective o, const PreferenceParams& prm) {
  const Config c = tiny();
  Transformer<double> m(c, B, T);
  auto p = test_support::random_vector(size_t(m.n_params()), 42, 0.5);
  for (const auto& t : m.layout().tensors())
    if (t.shape.size() == 1)
      for (int64_t i = 0; i < t.size; ++i) p[size_t(t.offset + i)] += 1.0;
  const Batch batch = make_batch(c.vocab);
  // The reference: the same model at other weights.
  auto ref_params = test_support::random_vector(size_t(m.n_params()), 43, 0.5);
  std::copy(ref_params.begin(), ref_params.end(), m.params());
  m.forward_scores(batch.inputs.data(), batch.targets.data(), batch.doc_start.data());
  const std::vector<double> ref(m.token_losses(), m.token_losses() + B * T);
  auto f = [&] {
    std::copy(p.begin(), p.end(), m.params());
    m.forward_scores(batch.inputs.data(), batch.targets.data(), batch.doc_start.data());
    return objective(o, prm, m.token_losses(), ref.data(), batch.targets, nullptr);
  };
  f();
  std::vector<double> d;
  objective(o, prm, m.token_losses(), ref.data(), batch.targets, &d);
  m.zero_grad();
  m.backward_weighted(d.data());
  const std::vector<double> g(m.grads(), m.grads() + m.n_params());
  // The same limits as the model's own check (tests/model/test_transformer_fd.cpp).
  test_support::expect_grad_matches_fd(p, g, f, std::string(objective_name(o)), 1e-7, 1e-5);
}

TEST(PreferenceFd, Dpo) { check(Objective::kDpo, {0.7, 0.1, 0.5}); }
TEST(PreferenceFd, Ipo) { check(Objective::kIpo, {0.6, 0.0, 0.5}); }
TEST(PreferenceFd, Orpo) { check(Objective::kOrpo, {0.4, 0.0, 0.5}); }
TEST(PreferenceFd, Simpo) { check(Objective::kSimpo, {2.5, 0.05, 0.8}); }

// The scores are the training loss's per-position terms: their mean over
// the counted targets is forward()'s loss.
TEST(PreferenceFd, TokenLossesAreTheLossTerms) {
  const Config c = tiny();
  Transformer<double> m(c, B, T);
  auto p = test_support::random_vector(size_t(m.n_params()), 5, 0.5);
  std::copy(p.begin(), p.end(), m.params());
  const Batch batch = make_batch(c.vocab);
  const double mean = m.forward(batch.inputs.data(), batch.targets.data(), batch.doc_start.data());
  m.forward_scores(batch.inputs.data(), batch.targets.data(), batch.doc_start.data());
  double sum = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < B * T; ++i)
    if (batch.targets[size_t(i)] != corpus::kNoTarget) {
      sum += m.token_losses()[i];
      ++n;
    } else {
      EXPECT_EQ(m.token_losses()[i], 0.0) << i;
    }
  EXPECT_NEAR(sum / double(n), mean, 1e-12);
}

}  // namespace
}  // namespace ggtrain::train
