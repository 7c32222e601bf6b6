#include "train/preference_loss.h"

#include <cmath>

#include "util/error.h"

namespace ggtrain::train {

namespace {

// log(sigmoid(x)), without overflow for large |x|.
double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }
double sigmoid(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }

// TRL's sigmoid loss on z = beta * logits, with label smoothing eps:
// -(1 - eps) log sigmoid(z) - eps log sigmoid(-z); returns the loss and
// sets d = d loss / d z.
double smoothed_sigmoid_loss(double z, double eps, double* d) {
  *d = -(1 - eps) * sigmoid(-z) + eps * sigmoid(z);
  return -(1 - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
}

// The log-odds of a probability e^a (a = a mean log-probability < 0):
// a - log(1 - e^a), and its derivative 1 / (1 - e^a), both through expm1
// so that a near 0 keeps its precision.
double log_odds(double a) { return a - std::log(-std::expm1(a)); }
double d_log_odds(double a) { return -1 / std::expm1(a); }

}  // namespace

std::string_view objective_name(Objective o) {
  switch (o) {
    case Objective::kSft: return "sft";
    case Objective::kDpo: return "dpo";
    case Objective::kIpo: return "ipo";
    case Objective::kOrpo: return "orpo";
    case Objective::kSimpo: return "simpo";
    case Objective::kDistill: return "distill";
    case Objective::kGrpo: return "grpo";
  }
  return "?";
}

PairLoss pair_loss(Objective o, const PreferenceParams& p, const PairLogps& x) {
  const double beta = p.beta;
  // IPO, ORPO and SimPO work on mean log-probabilities per token.
  const double nc = double(x.n_chosen), nr = double(x.n_rejected);
  PairLoss r;
  switch (o) {
    case Objective::kDpo: {
      // logits = (pi_c - pi_r) - (ref_c - ref_r), summed log-probabilities
      const double logits = (x.chosen - x.rejected) - (x.ref_chosen - x.ref_rejected);
      double dz = 0;
      r.loss = smoothed_sigmoid_loss(beta * logits, p.label_smoothing, &dz);
      r.d_chosen = beta * dz;
      r.d_rejected = -beta * dz;
      r.reward_chosen = beta * (x.chosen - x.ref_chosen);
      r.reward_rejected = beta * (x.rejected - x.ref_rejected);
      return r;
    }
    case Objective::kIpo: {
      // (logits - 1 / (2 beta))^2 on mean log-probabilities (TRL averages
      // both the policy's and the reference's for IPO)
      const double c = x.chosen / nc, rj = x.rejected / nr, rc = x.ref_chosen / nc, rr = x.ref_rejected / nr;
      const double gap = (c - rj) - (rc - rr) - 1 / (2 * beta);
      r.loss = gap * gap;
      r.d_chosen = 2 * gap / nc;
      r.d_rejected = -2 * gap / nr;
      r.reward_chosen = beta * (c - rc);
      r.reward_rejected = beta * (rj - rr);
      return r;
    }
    case Objective::kOrpo: {
      // -lambda log sigmoid(log_odds(c) - log_odds(r)); the chosen NLL is
      // added by the caller over the batch's chosen tokens
      const double c = x.chosen / nc, rj = x.rejected / nr;
      const double lo = log_odds(c) - log_odds(rj);
      r.loss = -beta * log_sigmoid(lo);
      const double dlo = -beta * sigmoid(-lo);
      r.d_chosen = dlo * d_log_odds(c) / nc;
      r.d_rejected = -dlo * d_log_odds(rj) / nr;
      r.reward_chosen = beta * c;
      r.reward_rejected = beta * rj;
      return r;
    }
    case Objective::kSimpo: {
      // sigmoid loss on beta * (c - r - gamma / beta), mean log-probabilities
      const double c = x.chosen / nc, rj = x.rejected / nr;
      double dz = 0;
      r.loss = smoothed_sigmoid_loss(beta * (c - rj - p.simpo_gamma / beta), p.label_smoothing, &dz);
      r.d_chosen = beta * dz / nc;
      r.d_rejected = -beta * dz / nr;
      r.reward_chosen = beta * c;
      r.reward_rejected = beta * rj;
      return r;
    }
    case Objective::kSft:
    case Objective::kDistill:
    case Objective::kGrpo: break;
  }
  fail("pair_loss: objective {} has no pair loss", objective_name(o));
}

}  // namespace ggtrain::train
