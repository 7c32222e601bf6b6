#include "train/grpo_loss.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace ggtrain::train {

namespace {

struct GroupMoments {
  double mean = 0, std = 0;
};

// torch.std's default: the unbiased estimate (NaN for a group of one,
// which the config refuses).
GroupMoments moments(const double* r, int64_t n) {
  GroupMoments m;
  for (int64_t i = 0; i < n; ++i) m.mean += r[i];
  m.mean /= double(n);
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += (r[i] - m.mean) * (r[i] - m.mean);
  m.std = std::sqrt(ss / double(n - 1));
  return m;
}

void check_groups(const std::vector<double>& rewards, int64_t group) {
  if (group < 2 || rewards.size() % size_t(group) != 0)
    fail("GRPO: {} rewards do not form groups of {} (at least 2)", rewards.size(), group);
}

}  // namespace

std::vector<double> group_advantages(const std::vector<double>& rewards, int64_t group, bool scale_rewards) {
  check_groups(rewards, group);
  std::vector<double> a(rewards.size());
  for (size_t g = 0; g < rewards.size(); g += size_t(group)) {
    const GroupMoments m = moments(rewards.data() + g, group);
    for (size_t i = g; i < g + size_t(group); ++i)
      a[i] = scale_rewards ? (rewards[i] - m.mean) / (m.std + 1e-4) : rewards[i] - m.mean;
  }
  return a;
}

double mean_group_std(const std::vector<double>& rewards, int64_t group) {
  check_groups(rewards, group);
  double sum = 0;
  for (size_t g = 0; g < rewards.size(); g += size_t(group)) sum += moments(rewards.data() + g, group).std;
  return sum / double(rewards.size() / size_t(group));
}

GrpoToken grpo_token(double logp, double old_logp, double ref_logp, double advantage, const GrpoParams& p) {
  GrpoToken t;
  const double ratio = std::exp(logp - old_logp);
  const double clipped_ratio = std::clamp(ratio, 1 - p.epsilon_low, 1 + p.epsilon_high);
  // min(r A, clip(r) A) takes the clipped branch exactly when r left the
  // range in the direction A rewards; its gradient in logp is then 0.
  t.clipped = (advantage > 0 && ratio > 1 + p.epsilon_high) || (advantage < 0 && ratio < 1 - p.epsilon_low);
  t.loss = -std::min(ratio * advantage, clipped_ratio * advantage);
  t.d_logp = t.clipped ? 0 : -ratio * advantage;
  if (p.beta != 0) {
    const double d = ref_logp - logp;
    t.kl = std::exp(d) - d - 1;
    t.loss += p.beta * t.kl;
    t.d_logp += p.beta * (1 - std::exp(d));
  }
  return t;
}

}  // namespace ggtrain::train
