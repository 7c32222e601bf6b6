// What distillation's loss adds to a step: distill_row (forward KL against
// a top-k teacher row, its gradient written over the logits) against the
// cross-entropy SFT runs on the same rows (kernels::cross_entropy_fused),
// and the teacher's top-k selection (teacher_top_k), per position, at a
// real vocabulary. Rows are split over the threads as the objective splits
// them. One invocation prints every row of the table:
//
//   build/bench/bench_distill [V (default 151936)] [rows (default 512)] [k (default 64)]
#include <fmt/core.h>
#include <omp.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "bench_util.h"
#include "kernels/cross_entropy.h"
#include "train/distill_loss.h"
#include "train/teacher_topk.h"

using namespace ggtrain;

namespace {

std::vector<float> random_logits(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> z(static_cast<size_t>(n));
  for (auto& x : z) x = d(rng);
  return z;
}

template <typename F>
double best_of(int reps, F f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = bench::now_s();
    f();
    best = std::min(best, bench::now_s() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t V = argc > 1 ? std::atoll(argv[1]) : 151936, R = argc > 2 ? std::atoll(argv[2]) : 512,
                k = argc > 3 ? std::atoll(argv[3]) : 64;
  const std::vector<float> student = random_logits(R * V, 1), teacher = random_logits(R * V, 2);
  std::vector<int32_t> ids(size_t(R * k)), targets(static_cast<size_t>(R));
  std::vector<float> logp(size_t(R * k)), log_other(static_cast<size_t>(R)), work(student.size());
  std::vector<float> losses(static_cast<size_t>(R)), lse(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) targets[size_t(r)] = int32_t((r * 7919) % V);
  const double t_topk = best_of(3, [&] {
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t r = 0; r < R; ++r)
      train::teacher_top_k(teacher.data() + r * V, V, V, k, 1.0, ids.data() + r * k, logp.data() + r * k,
                           &log_other[size_t(r)]);
  });
  const double t_ce = best_of(3, [&] {
    work = student;
    kernels::cross_entropy_fused(losses.data(), lse.data(), work.data(), targets.data(), R, V, 1.f / float(R));
  });
  const double t_copy = best_of(3, [&] { work = student; });
  auto distill = [&](double alpha, double tau) {
    return best_of(3, [&] {
      work = student;
#pragma omp parallel for schedule(dynamic, 4)
      for (int64_t r = 0; r < R; ++r) {
        float* z = work.data() + r * V;
        const train::TeacherRow t{ids.data() + r * k, logp.data() + r * k, k, log_other[size_t(r)]};
        train::distill_row(z, z, V, t, targets[size_t(r)], {tau, alpha, train::Divergence::kForward}, 1.0 / double(R));
      }
    });
  };
  const double t_kd = distill(0.0, 1.0), t_kd_mix = distill(0.5, 2.0);
  const auto per_row_us = [&](double s) { return 1e6 * s / double(R); };
  fmt::print("V {}, {} rows, k {}, {} threads (copying the rows: {:.1f} us a row, included below but the top k)\n", V,
             R, k, omp_get_max_threads(), per_row_us(t_copy));
  fmt::print("| what | us a row |\n|---|---|\n");
  fmt::print("| cross-entropy (SFT's fused loss and gradient) | {:.1f} |\n", per_row_us(t_ce));
  fmt::print("| distill_row, forward KL, alpha 0, T 1 | {:.1f} |\n", per_row_us(t_kd));
  fmt::print("| distill_row, forward KL, alpha 0.5, T 2 | {:.1f} |\n", per_row_us(t_kd_mix));
  fmt::print("| teacher_top_k (once per position, before training) | {:.1f} |\n", per_row_us(t_topk));
  return 0;
}
