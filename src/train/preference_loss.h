#pragma once
// Preference objectives on a pair's log-probabilities: DPO (sigmoid, with
// label smoothing), IPO, ORPO and SimPO, with their formulas as TRL 0.12
// writes them (trl/trainer/dpo_trainer.py `dpo_loss`, orpo_trainer.py
// `odds_ratio_loss`, cpo_trainer.py `cpo_loss` with loss_type "simpo").
// Each gives the pair's loss, its derivatives with respect to the summed
// log-probabilities of the two answers (what the model's backward takes),
// and the rewards TRL logs.
#include <cstdint>
#include <string_view>

namespace ggtrain::train {

// kDistill: distillation from a teacher (train/distill_loss.h); kGrpo: RL
// on verifiable rewards (train/grpo_loss.h).
enum class Objective { kSft, kDpo, kIpo, kOrpo, kSimpo, kDistill, kGrpo };

std::string_view objective_name(Objective o);
// Preference objectives train on chosen/rejected pairs.
inline bool on_pairs(Objective o) {
  return o == Objective::kDpo || o == Objective::kIpo || o == Objective::kOrpo || o == Objective::kSimpo;
}
// DPO and IPO compare with a reference model; ORPO and SimPO need none.
inline bool needs_reference(Objective o) { return o == Objective::kDpo || o == Objective::kIpo; }
// ORPO adds the chosen answers' mean negative log-likelihood (SFT) to its loss.
inline bool adds_chosen_nll(Objective o) { return o == Objective::kOrpo; }

struct PreferenceParams {
  double beta = 0.1;  // DPO/IPO/SimPO: beta; ORPO: lambda
  double label_smoothing = 0.0;  // DPO and SimPO (conservative DPO)
  double simpo_gamma = 0.5;  // SimPO's target margin
};

// One pair: each answer's log-probability summed over its tokens, its token
// count, and the reference model's sums (DPO and IPO only).
struct PairLogps {
  double chosen = 0, rejected = 0;
  int64_t n_chosen = 1, n_rejected = 1;
  double ref_chosen = 0, ref_rejected = 0;
};

struct PairLoss {
  double loss = 0;
  // d loss / d chosen, d loss / d rejected (the sums of PairLogps).
  double d_chosen = 0, d_rejected = 0;
  // TRL's rewards/chosen and rewards/rejected for this pair.
  double reward_chosen = 0, reward_rejected = 0;
};

// Objective::kSft has no pair loss: Error.
PairLoss pair_loss(Objective o, const PreferenceParams& p, const PairLogps& x);

}  // namespace ggtrain::train
