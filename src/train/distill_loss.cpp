#include "train/distill_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cross_entropy.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

// The student's side of one row: exp(z_j / tau - m) summed over the
// vocabulary (s) and over the tokens outside the teacher's top k (s_other),
// in one pass that walks the sorted top-k ids alongside.
template <typename T>
void student_sums(const T* z, int64_t V, double tau, double m, const std::vector<int32_t>& sorted_ids, double& s,
                  double& s_other) {
  s = s_other = 0;
  size_t next = 0;
  for (int64_t j = 0; j < V; ++j) {
    const double e = double(std::exp(T(double(z[j]) / tau - m)));
    s += e;
    if (next < sorted_ids.size() && sorted_ids[next] == j) ++next;
    else s_other += e;
  }
}

}  // namespace

template <typename T>
DistillTerms distill_row(const T* z, T* d_z, int64_t V, const TeacherRow& t, int32_t target, const DistillParams& p,
                         double weight) {
  const double tau = p.temperature;
  thread_local std::vector<int32_t> sorted;
  thread_local std::vector<double> top_z;  // z of the top-k ids, kept before d_z overwrites them
  sorted.assign(t.ids, t.ids + t.k);
  std::sort(sorted.begin(), sorted.end());
  if (t.k > 0 && (sorted.front() < 0 || sorted.back() >= V))
    fail("distillation: a teacher token id is outside the student's vocabulary [0, {})", V);
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail("distillation: the teacher's top-k tokens of a position repeat an id");
  top_z.resize(size_t(t.k));
  for (int64_t i = 0; i < t.k; ++i) top_z[size_t(i)] = double(z[t.ids[i]]);

  const double z_max = double(*std::max_element(z, z + V));
  const double m = z_max / tau;  // the max of z / tau
  double s = 0, s_other = 0;
  student_sums(z, V, tau, m, sorted, s, s_other);
  const double lse = m + std::log(s);
  const bool student_other = t.k < V;  // the student has tokens outside the top k
  const double q_other = student_other ? s_other / s : 0.0;
  const double log_q_other = student_other ? std::log(s_other) - std::log(s) : -INFINITY;
  const double log_p_other = double(t.log_other);
  const double p_other = std::exp(log_p_other);  // 0 for -inf

  DistillTerms r;
  if (p.divergence == Divergence::kForward) {
    for (int64_t i = 0; i < t.k; ++i) {
      const double lp = double(t.logp[i]);
      r.kl += std::exp(lp) * (lp - (top_z[size_t(i)] / tau - lse));
    }
    if (p_other > 0) r.kl += p_other * (log_p_other - log_q_other);
  } else {
    const double lp_other = std::max(log_p_other, kLogOtherFloor);
    for (int64_t i = 0; i < t.k; ++i) {
      const double lq = top_z[size_t(i)] / tau - lse;
      r.kl += std::exp(lq) * (lq - double(t.logp[i]));
    }
    if (q_other > 0) r.kl += q_other * (log_q_other - lp_other);
  }
  const bool hard = target != kernels::kNoTarget && p.alpha > 0;
  double lse1 = 0;  // the log-sum-exp at temperature 1, for the hard label
  if (hard) {
    if (target < 0 || target >= V) fail("distillation: target {} is outside the vocabulary [0, {})", target, V);
    double s1 = 0;
    for (int64_t j = 0; j < V; ++j) s1 += double(std::exp(T(double(z[j]) - z_max)));
    lse1 = z_max + std::log(s1);
    r.nll = lse1 - double(z[target]);
  }
  if (!d_z) return r;

  // d(KL)/d(u), u = z / tau: forward, P q_j - (the teacher's share of j's
  // bin), which for a token outside the top k is q_j * (P - p_other /
  // q_other); P, the teacher's stored mass, is 1 up to the float rounding
  // of its log-probabilities, kept so the gradient is the exact one of the
  // loss computed. Reverse: q_j * (log-ratio of j's bin - KL).
  double mass = p_other;
  for (int64_t i = 0; i < t.k; ++i) mass += std::exp(double(t.logp[i]));
  const double other_factor = p.divergence == Divergence::kForward
                                  ? (q_other > 0 ? mass - p_other / q_other : mass)
                                  : (log_q_other - std::max(log_p_other, kLogOtherFloor)) - r.kl;
  const double soft = weight * (1 - p.alpha) * tau;  // tau^2 * d/dz = tau * d/du
  const double hard_w = hard ? weight * p.alpha : 0.0;
  for (int64_t j = 0; j < V; ++j) {
    const double zj = double(z[j]);
    const double q = double(std::exp(T(zj / tau - lse)));
    double g = soft * q * other_factor;
    if (hard) g += hard_w * double(std::exp(T(zj - lse1)));
    d_z[j] = T(g);
  }
  for (int64_t i = 0; i < t.k; ++i) {
    const double zi = top_z[size_t(i)], lq = zi / tau - lse, q = std::exp(lq), lp = double(t.logp[i]);
    double g = p.divergence == Divergence::kForward ? mass * q - std::exp(lp) : q * ((lq - lp) - r.kl);
    g *= soft;
    if (hard) g += hard_w * std::exp(zi - lse1);
    d_z[t.ids[i]] = T(g);
  }
  if (hard) d_z[target] = T(double(d_z[target]) - hard_w);
  return r;
}

template DistillTerms distill_row<float>(const float*, float*, int64_t, const TeacherRow&, int32_t,
                                         const DistillParams&, double);
template DistillTerms distill_row<double>(const double*, double*, int64_t, const TeacherRow&, int32_t,
                                          const DistillParams&, double);

}  // namespace ggtrain::train
