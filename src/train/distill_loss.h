#pragma once
// Distillation's per-position loss against a teacher stored as its top-k
// tokens (train/teacher_topk.h): the teacher's distribution at temperature
// tau, truncated to k tokens plus one bucket holding the rest of its mass,
// against the student's softmax(z / tau) gathered into the same k + 1 bins.
// The divergence is exact over that support (k = vocabulary: the full one).
//   forward KL(p || q) (Hinton et al. 2015, "Distilling the Knowledge in a
//     Neural Network": soft targets, the loss scaled by tau^2 so gradients
//     keep their size as tau changes; the "supervised KD" of GKD, Agarwal et
//     al. 2024, at tau = 1);
//   reverse KL(q || p) (the mode-seeking divergence of MiniLLM, Gu et al.
//     2024, here token by token on the data's positions, not on the
//     student's own samples);
// mixed with the hard-label cross-entropy at tau = 1 (Hinton's weighted
// average): loss = alpha * nll + (1 - alpha) * tau^2 * KL.
#include <cstdint>

namespace ggtrain::train {

enum class Divergence { kForward, kReverse };

struct DistillParams {
  double temperature = 1.0;
  double alpha = 0.0;  // the hard-label loss's weight; 0 = pure distillation
  Divergence divergence = Divergence::kForward;
};

// One position's teacher: its k most likely tokens (ids below the student's
// vocabulary), their log-probabilities at the temperature, and the log of
// the mass of every other token (-inf when there is none).
struct TeacherRow {
  const int32_t* ids;
  const float* logp;
  int64_t k;
  float log_other;
};

// What one position contributes: the divergence and, when alpha > 0, the
// hard-label -log p (0 otherwise: the loss does not need it, and a caller
// that logs it has it from the forward pass).
struct DistillTerms {
  double kl = 0, nll = 0;
  double loss(const DistillParams& p) const {
    return p.alpha * nll + (1 - p.alpha) * p.temperature * p.temperature * kl;
  }
};

// Reverse KL with a bucket the teacher leaves empty (k covers its
// vocabulary but not the student's): the teacher's log-probability there
// is taken as this floor (1e-30) instead of -inf.
constexpr double kLogOtherFloor = -69.07755278982137;

// The terms of the student logits z[V] against `teacher` and the hard
// `target`; when d_z is not null (it may be z itself), d_z = weight *
// d(loss)/d(z). The sums run in double.
template <typename T>
DistillTerms distill_row(const T* z, T* d_z, int64_t V, const TeacherRow& teacher, int32_t target,
                         const DistillParams& p, double weight);

}  // namespace ggtrain::train
