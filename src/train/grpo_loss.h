#pragma once
// GRPO's loss (Shao et al. 2024, "DeepSeekMath"), as TRL's GRPOTrainer
// writes it (trl/trainer/grpo_trainer.py, `_compute_loss`, loss_type "dapo",
// TRL's default): each completion token t of rollout i has the policy ratio
// r = exp(logp - old_logp), the per-token loss
//   -min(r A_i, clip(r, 1 - eps_low, 1 + eps_high) A_i) + beta KL_t
// with KL_t = exp(ref - logp) - (ref - logp) - 1 (Schulman's k3 estimator
// of KL(policy || reference)), and the step's loss is the sum over every
// completion token of the step divided by their count (the "dapo"
// normalisation: a token-level mean over the whole batch of rollouts).
// A_i is the group-normalised reward: (r_i - mean) / (std + 1e-4) over the
// rollouts of one prompt, std unbiased as torch.std computes it.
#include <cstdint>
#include <vector>

namespace ggtrain::train {

struct GrpoParams {
  double epsilon_low = 0.2, epsilon_high = 0.2;  // the ratio's clip range
  double beta = 0.0;  // the KL penalty's weight (TRL's default: 0, no reference model)
  bool scale_rewards = true;  // divide by the group's std (TRL's scale_rewards = "group")
};

// The advantages of rewards in consecutive groups of `group` rollouts.
std::vector<double> group_advantages(const std::vector<double>& rewards, int64_t group, bool scale_rewards);
// The rewards' std within each group (unbiased), averaged over the groups:
// TRL's `reward_std`.
double mean_group_std(const std::vector<double>& rewards, int64_t group);

// One completion token's loss, d(loss)/d(logp) and what TRL logs of it:
// clipped when the ratio left the range on the side the advantage pushes
// (the token then carries no policy gradient), and the KL estimate.
struct GrpoToken {
  double loss = 0, d_logp = 0, kl = 0;
  bool clipped = false;
};

// logp: the policy's log-probability of the token now; old_logp: at
// sampling (equal on a batch's first pass: r = 1); ref_logp: the
// reference's (read only when beta > 0).
GrpoToken grpo_token(double logp, double old_logp, double ref_logp, double advantage, const GrpoParams& p);

}  // namespace ggtrain::train
