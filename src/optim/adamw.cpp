#include "optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace ggtrain::optim {

void adamw_step_range(const model::ParamLayout& layout, int64_t lo, int64_t hi, float* params, const float* grads,
                      float* m, float* v, int64_t t, double lr, const AdamWConfig& cfg, float grad_scale) {
  // Scalars in double, as PyTorch computes them in Python.
  const double bc1 = 1.0 - std::pow(double(cfg.beta1), double(t));
  const double bc2 = 1.0 - std::pow(double(cfg.beta2), double(t));
  const float step_size = float(lr / bc1);
  const float bc2_sqrt = float(std::sqrt(bc2));
  const float b1 = cfg.beta1, b2 = cfg.beta2, eps = cfg.eps;
  for (const auto& pt : layout.tensors()) {
    const int64_t a = std::max(lo, pt.offset), e = std::min(hi, pt.offset + pt.size);  // part in [lo, hi)
    if (a >= e) continue;
    const float decay = pt.decay ? float(1.0 - lr * double(cfg.weight_decay)) : 1.0f;
    float* p = params + pt.source_offset + (a - pt.offset);
    const float* g = grads + (a - lo);
    float* mt = m + (a - lo);
    float* vt = v + (a - lo);
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < e - a; ++i) {
      const float gi = g[i] * grad_scale;
      const float pi = p[i] * decay;
      mt[i] = b1 * mt[i] + (1.0f - b1) * gi;
      vt[i] = b2 * vt[i] + (1.0f - b2) * gi * gi;
      const float denom = std::sqrt(vt[i]) / bc2_sqrt + eps;
      p[i] = pi - step_size * (mt[i] / denom);
    }
  }
}

void adamw_step(const model::ParamLayout& layout, float* params, const float* grads, float* m, float* v, int64_t t,
                double lr, const AdamWConfig& cfg, float grad_scale) {
  adamw_step_range(layout, 0, layout.total(), params, grads, m, v, t, lr, cfg, grad_scale);
}

AdamW::AdamW(const model::ParamLayout& layout, const AdamWConfig& cfg)
    : layout_(layout), cfg_(cfg), slices_{{0, layout.total(), 0}} {
  moments_.m.assign(size_t(layout.total()), 0.f);
  moments_.v.assign(size_t(layout.total()), 0.f);
}

void AdamW::keep_only(std::vector<Slice> slices) {
  if (slices_.size() != 1 || slices_[0].hi != layout_.total())
    fail("AdamW: keep_only on a state already cut into slices");
  int64_t packed = 0;
  for (const auto& s : slices) packed = std::max(packed, s.at + (s.hi - s.lo));
  for (auto* whole : {&moments_.m, &moments_.v}) {
    std::vector<float> kept(static_cast<size_t>(packed));
    for (const auto& s : slices) std::copy(whole->begin() + s.lo, whole->begin() + s.hi, kept.begin() + s.at);
    whole->swap(kept);  // the whole vector is freed here
  }
  slices_ = std::move(slices);
}

void AdamW::step(float* params, const float* grads, double lr, float grad_scale) {
  ++steps_;
  for (const auto& s : slices_)
    adamw_step_range(layout_, s.lo, s.hi, params, grads + s.at, moments_.m.data() + s.at, moments_.v.data() + s.at,
                     steps_, lr, cfg_, grad_scale);
}

double grad_sum_of_squares(const float* grads, int64_t n) {
  constexpr int64_t kBlock = 1 << 14;
  const int64_t n_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(n_blocks), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlock);
    double s = 0;
    // Vector lanes (fixed at compile time) reorder the sum within a block:
    // still the same value for any thread count.
#pragma omp simd reduction(+ : s)
    for (int64_t i = b * kBlock; i < end; ++i) s += double(grads[i]) * double(grads[i]);
    partial[size_t(b)] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

double grad_global_norm(const float* grads, int64_t n) { return std::sqrt(grad_sum_of_squares(grads, n)); }

float clip_scale(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0f;
  return float(max_norm / (norm + 1e-6));
}

}  // namespace ggtrain::optim
