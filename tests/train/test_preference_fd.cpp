// The model's backward from per-position weights (what preference tuning
// takes) against central finite differences in double of each objective
// over whole answers: two rows, each packing a pair (chosen answer, then
// rejected answer) as two documents after a prompt-like stretch without loss.
// And score_pairs, the trainer's own weights for a step of two micro-batches,
// against central differences of the step objective, with each objective's
// first-step loss anchored to its closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "corpus/batch_loader.h"
#include "kernels/cross_entropy.h"
#include "model/transformer.h"
#include "support/fd_check.h"
#include "train/preference_batch.h"
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

// --- score_pairs over a step of two micro-batches

// A micro-batch of 2 rows of 12 positions, each row one pair: the chosen
// answer's document at [0, 6), the rejected one's at [6, 12), each with two
// prompt positions and a last position without a target; the answers'
// lengths differ from row to row and micro-batch to micro-batch (`shift`).
struct PairBatch {
  static constexpr int64_t kB = 2, kT = 12;
  std::vector<int32_t> targets, doc_start;
  std::vector<std::pair<Span, Span>> spans;  // [chosen, rejected] targets of each row
};

PairBatch pair_batch(int shift) {
  PairBatch b;
  for (int64_t r = 0; r < PairBatch::kB; ++r) {
    const int64_t answer_len[2] = {1 + (r + shift) % 3, 3 - (r + shift) % 3};  // chosen, rejected: 1..3 tokens
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t i = 0; i < 6; ++i) {
        const bool counted = i >= 2 && i < 2 + answer_len[d];
        b.targets.push_back(counted ? int32_t(1 + i) : corpus::kNoTarget);
        b.doc_start.push_back(int32_t(6 * d));
      }
    const int64_t row = r * PairBatch::kT;
    b.spans.push_back({{row + 2, row + 2 + answer_len[0]}, {row + 8, row + 8 + answer_len[1]}});
  }
  return b;
}

// The step objective from its definition: the mean over the step's pairs
// of each pair's loss, plus for ORPO the mean -log p over the step's chosen
// tokens; `tl` and `ref` the token losses of both micro-batches, one after
// the other.
double step_objective(Objective o, const PreferenceParams& p, const std::vector<PairBatch>& mbs, const double* tl,
                      const double* ref) {
  double loss = 0, nll = 0;
  int64_t pairs = 0, chosen_tokens = 0;
  for (size_t k = 0; k < mbs.size(); ++k) {
    const int64_t at = int64_t(k) * PairBatch::kB * PairBatch::kT;
    for (const auto& [c, r] : mbs[k].spans) {
      PairLogps x;
      x.chosen = answer_logp(tl + at, mbs[k].targets, c, &x.n_chosen);
      x.rejected = answer_logp(tl + at, mbs[k].targets, r, &x.n_rejected);
      int64_t n = 0;
      x.ref_chosen = answer_logp(ref + at, mbs[k].targets, c, &n);
      x.ref_rejected = answer_logp(ref + at, mbs[k].targets, r, &n);
      loss += pair_loss(o, p, x).loss;
      nll -= x.chosen;
      chosen_tokens += x.n_chosen;
      ++pairs;
    }
  }
  return loss / double(pairs) + (adds_chosen_nll(o) ? nll / double(chosen_tokens) : 0.0);
}

struct Scored {
  std::vector<double> d;  // d(step objective)/d(token loss), both micro-batches
  PreferenceTotals totals;
};

// What the trainer does: score_pairs on each micro-batch, weighed by the
// step's pair and chosen-token counts.
Scored score_step(Objective o, const PreferenceParams& p, const std::vector<PairBatch>& mbs,
                  const std::vector<float>& tl, const std::vector<float>& ref) {
  const int64_t n = PairBatch::kB * PairBatch::kT;
  PairCounts step;
  for (const auto& mb : mbs) {
    const PairCounts c = count_pairs(mb.targets.data(), mb.doc_start.data(), PairBatch::kB, PairBatch::kT);
    step.pairs += c.pairs;
    step.chosen_tokens += c.chosen_tokens;
  }
  Scored s;
  for (size_t k = 0; k < mbs.size(); ++k) {
    std::vector<float> d(size_t(n), -1.f);
    const auto pairs = find_pairs(mbs[k].targets.data(), mbs[k].doc_start.data(), PairBatch::kB, PairBatch::kT);
    score_pairs(o, p, pairs, mbs[k].targets.data(), tl.data() + k * n, ref.data() + k * n, step.pairs,
                step.chosen_tokens, s.totals, d.data());
    s.d.insert(s.d.end(), d.begin(), d.end());
  }
  return s;
}

// Token losses in (0.2, 2.2), as floats (what score_pairs reads).
std::vector<double> token_losses(size_t n, uint64_t seed) {
  auto v = test_support::random_vector(n, seed, 1.0);
  for (auto& x : v) x = double(float(1.2 + x));
  return v;
}

std::vector<float> as_floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// Non-default settings for each objective: beta, label smoothing, gamma.
PreferenceParams params_for(Objective o) {
  switch (o) {
    case Objective::kDpo: return {0.3, 0.1, 0.5};
    case Objective::kIpo: return {0.6, 0.0, 0.5};
    case Objective::kOrpo: return {0.4, 0.0, 0.5};
    default: return {2.5, 0.05, 0.8};  // SimPO
  }
}

constexpr Objective kPairObjectives[] = {Objective::kDpo, Objective::kIpo, Objective::kOrpo, Objective::kSimpo};

// Every position's weight is the derivative of the step objective: the
// pairs of both micro-batches share one mean, ORPO's chosen tokens another,
// positions without a target get 0. Measured: within 3.2e-8 of the largest
// weight (the weights are floats); limit 1e-6. Weights normalised by the
// micro-batch's pairs instead of the step's fail it by 0.5.
TEST(ScorePairs, WeightsAreTheStepObjectivesGradientOverTwoMicroBatches) {
  const std::vector<PairBatch> mbs{pair_batch(0), pair_batch(1)};
  const size_t n = 2 * PairBatch::kB * PairBatch::kT;
  for (const Objective o : kPairObjectives) {
    SCOPED_TRACE(std::string(objective_name(o)));
    const PreferenceParams prm = params_for(o);
    std::vector<double> tl = token_losses(n, 11), ref = token_losses(n, 12);
    const Scored s = score_step(o, prm, mbs, as_floats(tl), as_floats(ref));
    for (size_t i = 0; i < n; ++i) {
      if (mbs[i / (n / 2)].targets[i % (n / 2)] == corpus::kNoTarget) {
        EXPECT_EQ(s.d[i], 0.0) << i;
      }
    }
    // The totals are the definition's sums too.
    EXPECT_NEAR(s.totals.loss / double(s.totals.pairs) +
                    (adds_chosen_nll(o) ? s.totals.chosen_nll / double(s.totals.chosen_tokens) : 0.0),
                step_objective(o, prm, mbs, tl.data(), ref.data()), 1e-6);
    auto f = [&] { return step_objective(o, prm, mbs, tl.data(), ref.data()); };
    test_support::expect_grad_matches_fd(tl, s.d, f, std::string(objective_name(o)), 1e-6, 1e-4);
  }
}

// The first step, where the policy is its reference (and, for the
// reference-free objectives, each chosen answer scores as its rejected
// one): DPO's loss is ln 2 whatever the smoothing, IPO's 1/(4 beta^2),
// ORPO's lambda ln 2 plus the chosen tokens' mean NLL, SimPO's the smoothed
// sigmoid loss of -gamma.
TEST(ScorePairs, FirstStepLossesAreTheirClosedForms) {
  // Chosen and rejected answers of the same lengths and token losses.
  PairBatch mb;
  for (int64_t r = 0; r < PairBatch::kB; ++r)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t i = 0; i < 6; ++i) {
        mb.targets.push_back(i >= 2 && i < 4 + r ? int32_t(1 + i) : corpus::kNoTarget);
        mb.doc_start.push_back(int32_t(6 * d));
      }
  const int64_t n = PairBatch::kB * PairBatch::kT;
  std::vector<double> tl = token_losses(size_t(n), 21);
  for (int64_t r = 0; r < PairBatch::kB; ++r)
    for (int64_t i = 0; i < 6; ++i) tl[size_t(r * 12 + 6 + i)] = tl[size_t(r * 12 + i)];
  const std::vector<float> f = as_floats(tl);
  double chosen_nll = 0;
  int64_t chosen_tokens = 0;
  for (int64_t i = 0; i < n; ++i)
    if (mb.targets[size_t(i)] != corpus::kNoTarget && i % 12 < 6) chosen_nll += tl[size_t(i)], ++chosen_tokens;
  const auto pairs = find_pairs(mb.targets.data(), mb.doc_start.data(), PairBatch::kB, PairBatch::kT);
  ASSERT_EQ(pairs.size(), 2u);
  auto mean_loss = [&](Objective o, const PreferenceParams& p) {
    PreferenceTotals t;
    score_pairs(o, p, pairs, mb.targets.data(), f.data(), f.data(), 2, chosen_tokens, t, nullptr);
    return t.loss / double(t.pairs);
  };
  const double ln2 = std::log(2.0);
  EXPECT_NEAR(mean_loss(Objective::kDpo, {0.3, 0.0, 0.5}), ln2, 1e-12);
  EXPECT_NEAR(mean_loss(Objective::kDpo, {0.3, 0.2, 0.5}), ln2, 1e-12);
  EXPECT_NEAR(mean_loss(Objective::kIpo, {0.6, 0.0, 0.5}), 1.0 / (4 * 0.6 * 0.6), 1e-12);
  EXPECT_NEAR(mean_loss(Objective::kOrpo, {0.4, 0.0, 0.5}), 0.4 * ln2, 1e-12);
  const double gamma = 0.8, ls = 0.05;
  const double simpo = -(1 - ls) * std::log(1 / (1 + std::exp(gamma))) - ls * std::log(1 / (1 + std::exp(-gamma)));
  EXPECT_NEAR(mean_loss(Objective::kSimpo, {2.5, ls, gamma}), simpo, 1e-12);
  // ORPO's step objective adds the chosen tokens' mean -log p.
  PreferenceTotals t;
  score_pairs(Objective::kOrpo, {0.4, 0.0, 0.5}, pairs, mb.targets.data(), f.data(), nullptr, 2, chosen_tokens, t,
              nullptr);
  EXPECT_NEAR(t.chosen_nll / double(t.chosen_tokens), chosen_nll / double(chosen_tokens), 1e-6);
}

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
