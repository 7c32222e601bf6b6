#pragma once
// AdamW exactly as torch.optim.AdamW (PyTorch 1.13, amsgrad off): decoupled
// decay first, p *= 1 - lr*wd (2-D weights only), then the bias-corrected
// Adam step with eps added to sqrt(v_hat). Gradient clipping is folded in as
// a scale on the gradient, so the whole update is one pass over memory.
#include <cstdint>

#include "model/params.h"

namespace ggtrain::optim {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// One update of every tensor in `layout`: grads, m and v at each tensor's
// offset, the parameter at its source_offset (they differ when `layout` is
// the trainable part of a model, ParamLayout::trainable). `t` is the 1-based
// step count used in the bias corrections; g is multiplied by grad_scale first.
void adamw_step(const model::ParamLayout& layout, float* params, const float* grads, float* m, float* v, int64_t t,
                double lr, const AdamWConfig& cfg, float grad_scale = 1.0f);

// The same update on elements [lo, hi) of `layout`'s index space only, with
// grads, m and v holding just those elements (grads[0] is element lo): a
// ZeRO-1 shard. adamw_step is this over [0, layout.total()).
void adamw_step_range(const model::ParamLayout& layout, int64_t lo, int64_t hi, float* params, const float* grads,
                      float* m, float* v, int64_t t, double lr, const AdamWConfig& cfg, float grad_scale = 1.0f);

// sum g^2 in double, summed in fixed-size blocks in a fixed order so the
// value is the same for any thread count (a ZeRO-1 rank sums its shard).
double grad_sum_of_squares(const float* grads, int64_t n);
// sqrt(grad_sum_of_squares).
double grad_global_norm(const float* grads, int64_t n);

// torch.nn.utils.clip_grad_norm_: scale = max_norm / (norm + 1e-6) when the
// norm exceeds max_norm (max_norm <= 0: no clipping).
float clip_scale(double norm, double max_norm);

}  // namespace ggtrain::optim
