// The preference objectives against TRL's formulas transcribed directly
// (naive log(sigmoid()), means taken before anything else), their
// derivatives against central differences of those transcriptions.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "support/compare.h"
#include "train/preference_loss.h"
#include "train/run_config.h"
#include "util/error.h"

namespace ggtrain::train {
namespace {

using test_support::compare;
using test_support::Comparison;
using test_support::within_abs;
using test_support::within_elementwise;

double naive_log_sigmoid(double x) { return std::log(1 / (1 + std::exp(-x))); }

// TRL 0.12, written as its Python reads (logps are sums over the answer's
// tokens here; TRL's IPO/ORPO/SimPO average them first).
double trl_loss(Objective o, const PreferenceParams& p, const PairLogps& x) {
  const double beta = p.beta, ls = p.label_smoothing;
  const double avg_c = x.chosen / double(x.n_chosen), avg_r = x.rejected / double(x.n_rejected);
  switch (o) {
    case Objective::kDpo: {
      const double logits = (x.chosen - x.rejected) - (x.ref_chosen - x.ref_rejected);
      return -naive_log_sigmoid(beta * logits) * (1 - ls) - naive_log_sigmoid(-beta * logits) * ls;
    }
    case Objective::kIpo: {
      const double logits =
          (avg_c - avg_r) - (x.ref_chosen / double(x.n_chosen) - x.ref_rejected / double(x.n_rejected));
      return std::pow(logits - 1 / (2 * beta), 2);
    }
    case Objective::kOrpo: {
      const double log_odds = (avg_c - avg_r) - (std::log1p(-std::exp(avg_c)) - std::log1p(-std::exp(avg_r)));
      return -(beta * naive_log_sigmoid(log_odds));
    }
    case Objective::kSimpo: {
      const double logits = (avg_c - avg_r) - p.simpo_gamma / beta;
      return -naive_log_sigmoid(beta * logits) * (1 - ls) - naive_log_sigmoid(-beta * logits) * ls;
    }
    case Objective::kSft:
    case Objective::kDistill:
    case Objective::kGrpo: break;
  }
  return NAN;
}

double central_difference(const std::function<double(double)>& f, double at) {
  const double h = 1e-5 * std::max(1.0, std::abs(at));
  return (f(at + h) - f(at - h)) / (2 * h);
}

struct Case {
  Objective o;
  PreferenceParams p;
};

class PairLossTest : public ::testing::TestWithParam<Case> {};

// Non-default parameters throughout, pairs on both sides of the margin.
const PairLogps kPairs[] = {
    {-12.5, -17.25, 5, 7, -13.0, -16.0},
    {-30.0, -22.0, 11, 4, -28.5, -23.5},
    {-3.1, -3.0, 2, 2, -2.9, -3.3},
    {-0.05, -9.0, 3, 6, -0.5, -8.0},  // a chosen answer near probability 1 (ORPO's log1p(-exp) edge)
};

TEST_P(PairLossTest, LossAndDerivativesAreTrlsFormula) {
  const auto [o, p] = GetParam();
  std::vector<double> loss, want_loss, grad, want_grad;  // grad: d/dchosen, d/drejected per pair
  for (const PairLogps& x : kPairs) {
    const PairLoss r = pair_loss(o, p, x);
    loss.push_back(r.loss);
    want_loss.push_back(trl_loss(o, p, x));
    grad.insert(grad.end(), {r.d_chosen, r.d_rejected});
    want_grad.push_back(central_difference(
        [&](double v) {
          PairLogps y = x;
          y.chosen = v;
          return trl_loss(o, p, y);
        },
        x.chosen));
    want_grad.push_back(central_difference(
        [&](double v) {
          PairLogps y = x;
          y.rejected = v;
          return trl_loss(o, p, y);
        },
        x.rejected));
  }
  const Comparison l = compare(loss, want_loss), g = compare(grad, want_grad);
  std::printf("%s: loss %.1e relative, derivatives %.1e\n", std::string(objective_name(o)).c_str(),
              l.max_elementwise_rel(), g.max_abs_diff);
  // Measured: loss at most 1.6e-16 relative (rounding), derivatives at
  // most 3.5e-11 (the central difference's own error, h = 1e-5). Limits
  // 1e-12 (+ 1e-12 absolute, for a loss near 0) and 1e-8.
  EXPECT_TRUE(within_elementwise(l, {.abs = 1e-12, .rel = 1e-12}));
  EXPECT_TRUE(within_abs(g, 1e-8));
}

INSTANTIATE_TEST_SUITE_P(
    Objectives, PairLossTest,
    ::testing::Values(Case{Objective::kDpo, {0.25, 0.0, 0.5}}, Case{Objective::kDpo, {0.3, 0.15, 0.5}},
                      Case{Objective::kIpo, {0.4, 0.0, 0.5}}, Case{Objective::kOrpo, {0.35, 0.0, 0.5}},
                      Case{Objective::kSimpo, {2.5, 0.0, 0.7}}, Case{Objective::kSimpo, {2.0, 0.1, 1.2}}),
    [](const auto& info) { return std::string(objective_name(info.param.o)) + std::to_string(info.index); });

TEST(PairLoss, RewardsAreTrls) {
  const PreferenceParams p{0.25, 0.0, 0.5};
  const PairLogps x{-12.5, -17.25, 5, 7, -13.0, -16.0};
  const PairLoss dpo = pair_loss(Objective::kDpo, p, x);
  EXPECT_DOUBLE_EQ(dpo.reward_chosen, 0.25 * (-12.5 + 13.0));
  EXPECT_DOUBLE_EQ(dpo.reward_rejected, 0.25 * (-17.25 + 16.0));
  const PairLoss simpo = pair_loss(Objective::kSimpo, p, x);
  EXPECT_DOUBLE_EQ(simpo.reward_chosen, 0.25 * -12.5 / 5);
  EXPECT_DOUBLE_EQ(simpo.reward_rejected, 0.25 * -17.25 / 7);
}

// Negative controls: the realistic slips the check above must catch.
TEST(PairLoss, ControlsThatMustFail) {
  const PreferenceParams p{0.4, 0.0, 0.5};
  const PairLogps x{-30.0, -22.0, 11, 4, -28.5, -23.5};
  // IPO on summed instead of mean log-probabilities
  PairLogps sums = x;
  sums.n_chosen = sums.n_rejected = 1;
  EXPECT_GT(std::abs(pair_loss(Objective::kIpo, p, sums).loss - trl_loss(Objective::kIpo, p, x)), 1e-3);
  // DPO without the reference
  PairLogps no_ref = x;
  no_ref.ref_chosen = no_ref.ref_rejected = 0;
  EXPECT_GT(std::abs(pair_loss(Objective::kDpo, p, no_ref).loss - trl_loss(Objective::kDpo, p, x)), 1e-3);
}

TEST(PairLoss, LargeMarginsStayFinite) {
  const PreferenceParams p{5.0, 0.1, 0.5};
  for (double gap : {-800.0, 800.0}) {
    const PairLoss r = pair_loss(Objective::kDpo, p, {gap, 0, 1, 1, 0, 0});
    EXPECT_TRUE(std::isfinite(r.loss) && std::isfinite(r.d_chosen)) << gap;
  }
}

TEST(PairLoss, SftHasNoPairLoss) { EXPECT_THROW(pair_loss(Objective::kSft, {}, {}), Error); }

// Each objective's name reads back through the config as itself.
TEST(Objective, Names) {
  for (auto o :
       {Objective::kSft, Objective::kDpo, Objective::kIpo, Objective::kOrpo, Objective::kSimpo, Objective::kDistill}) {
    RunConfig c;
    apply_override(c, fmt::format("train.objective={}", objective_name(o)));
    EXPECT_EQ(c.train.objective, o) << objective_name(o);
    EXPECT_EQ(option_name(o), objective_name(o));
  }
  RunConfig c;
  EXPECT_THROW(apply_override(c, "train.objective=kto"), Error);
}

}  // namespace
}  // namespace ggtrain::train
