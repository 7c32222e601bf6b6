#include "train/distill_loss.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cross_entropy.h"
#include "kernels/vexp.h"
#include "util/error.h"

namespace ggtrain::train {

// Over a work row w (d_z itself, or a scratch row when only the terms are
// wanted): w = z / tau, then e = exp(w - max) in place (the vectorized exp
// of the softmax kernels), its sum s, and the sum over the tokens outside
// the top k (their entries zeroed for one more sum, then restored), so the
// other bucket's mass is summed directly rather than as s minus the top k.
// The gradient is then one scaling pass over e plus the k + 1 corrections.
template <typename T>
DistillTerms distill_row(const T* z, T* d_z, int64_t V, const TeacherRow& t, int32_t target, const DistillParams& p,
                         double weight) {
  const double tau = p.temperature;
  thread_local std::vector<int32_t> sorted;
  thread_local std::vector<double> top_z, top_e;  // the top k's z and exp(z / tau - m)
  thread_local std::vector<T> scratch, hard_e;
  sorted.assign(t.ids, t.ids + t.k);
  std::sort(sorted.begin(), sorted.end());
  if (t.k > 0 && (sorted.front() < 0 || sorted.back() >= V))
    fail("distillation: a teacher token id is outside the student's vocabulary [0, {})", V);
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail("distillation: the teacher's top-k tokens of a position repeat an id");
  const bool hard = target != kernels::kNoTarget && p.alpha > 0;
  if (hard && (target < 0 || target >= V)) fail("distillation: target {} is outside the vocabulary [0, {})", target, V);
  top_z.resize(size_t(t.k));
  top_e.resize(size_t(t.k));
  for (int64_t i = 0; i < t.k; ++i) top_z[size_t(i)] = double(z[t.ids[i]]);
  const double z_max = double(kernels::max_of(z, V));
  const double z_target = hard ? double(z[target]) : 0.0;

  DistillTerms r;
  double lse1 = 0;  // the log-sum-exp at temperature 1, for the hard label
  if (hard) {
    lse1 = z_max + std::log(double(kernels::sum_exp_shift(z, V, T(z_max))));
    r.nll = lse1 - z_target;
    if (tau != 1 && d_z) {  // exp(z - lse1) for the hard label's gradient, before w overwrites z
      hard_e.assign(z, z + V);
      kernels::exp_shift(hard_e.data(), V, T(lse1));
    }
  }
  T* w = d_z;
  if (!w) {
    scratch.resize(size_t(V));
    w = scratch.data();
  }
  if (w != z) std::memcpy(w, z, size_t(V) * sizeof(T));
  if (tau != 1) {
    const T inv = T(1 / tau);
    for (int64_t j = 0; j < V; ++j) w[j] *= inv;
  }
  const double m = z_max / tau;
  kernels::exp_shift(w, V, T(m));
  const double s = kernels::sum_lanes(w, V);
  for (int64_t i = 0; i < t.k; ++i) {
    top_e[size_t(i)] = double(w[t.ids[i]]);
    w[t.ids[i]] = T(0);
  }
  const double s_other = kernels::sum_lanes(w, V);
  for (int64_t i = 0; i < t.k; ++i) w[t.ids[i]] = T(top_e[size_t(i)]);
  const double lse = m + std::log(s);
  const bool student_other = t.k < V;  // the student has tokens outside the top k
  const double q_other = student_other ? s_other / s : 0.0;
  const double log_q_other = student_other ? std::log(s_other) - std::log(s) : -INFINITY;
  const double log_p_other = double(t.log_other);
  const double p_other = std::exp(log_p_other);  // 0 for -inf
  const double lp_other_floored = std::max(log_p_other, kLogOtherFloor);

  if (p.divergence == Divergence::kForward) {
    for (int64_t i = 0; i < t.k; ++i) {
      const double lp = double(t.logp[i]);
      r.kl += std::exp(lp) * (lp - (top_z[size_t(i)] / tau - lse));
    }
    if (p_other > 0) r.kl += p_other * (log_p_other - log_q_other);
  } else {
    for (int64_t i = 0; i < t.k; ++i) {
      const double lq = top_z[size_t(i)] / tau - lse;
      r.kl += std::exp(lq) * (lq - double(t.logp[i]));
    }
    if (q_other > 0) r.kl += q_other * (log_q_other - lp_other_floored);
  }
  if (!d_z) return r;

  // d(KL)/d(u), u = z / tau: forward, P q_j - (the teacher's share of j's
  // bin), which for a token outside the top k is q_j * (P - p_other /
  // q_other); P, the teacher's stored mass, is 1 up to the float rounding
  // of its log-probabilities, kept so the gradient is the exact one of the
  // loss computed. Reverse: q_j * (log-ratio of j's bin - KL).
  double mass = p_other;
  for (int64_t i = 0; i < t.k; ++i) mass += std::exp(double(t.logp[i]));
  const double other_factor = p.divergence == Divergence::kForward ? (q_other > 0 ? mass - p_other / q_other : mass)
                                                                   : (log_q_other - lp_other_floored) - r.kl;
  const double soft = weight * (1 - p.alpha) * tau;  // tau^2 * d/dz = tau * d/du
  const double hard_w = hard ? weight * p.alpha : 0.0;
  // Every token as if outside the top k: soft * q_j * other_factor with q_j
  // = e_j / s, plus the hard label's hard_w * exp(z_j - lse1), which at tau
  // = 1 is e_j * exp(m - lse1).
  if (hard && tau != 1) {
    const T a = T(soft * other_factor / s), b = T(hard_w);
    for (int64_t j = 0; j < V; ++j) w[j] = a * w[j] + b * hard_e[size_t(j)];
  } else {
    const T a = T(soft * other_factor / s + (hard ? hard_w * std::exp(m - lse1) : 0.0));
    for (int64_t j = 0; j < V; ++j) w[j] *= a;
  }
  for (int64_t i = 0; i < t.k; ++i) {
    const double lq = top_z[size_t(i)] / tau - lse, q = top_e[size_t(i)] / s, lp = double(t.logp[i]);
    double g = p.divergence == Divergence::kForward ? mass * q - std::exp(lp) : q * ((lq - lp) - r.kl);
    g *= soft;
    if (hard) g += hard_w * std::exp(top_z[size_t(i)] - lse1);
    w[t.ids[i]] = T(g);
  }
  if (hard) w[target] = T(double(w[target]) - hard_w);
  return r;
}

template DistillTerms distill_row<float>(const float*, float*, int64_t, const TeacherRow&, int32_t,
                                         const DistillParams&, double);
template DistillTerms distill_row<double>(const double*, double*, int64_t, const TeacherRow&, int32_t,
                                          const DistillParams&, double);

}  // namespace ggtrain::train
