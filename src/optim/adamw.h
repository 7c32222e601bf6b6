#pragma once
// AdamW exactly as torch.optim.AdamW (PyTorch 1.13, amsgrad off): decoupled
// decay first, p *= 1 - lr*wd (2-D weights only), then the bias-corrected
// Adam step with eps added to sqrt(v_hat). Gradient clipping is folded in as
// a scale on the gradient, so the whole update is one pass over memory.
#include <cstdint>
#include <vector>

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

// The optimizer of a run: AdamW with its state, the moments m and v and the
// number of updates taken (the t of the bias corrections), over the
// trainable parameters' index space `layout`. It starts whole; under ZeRO-1
// the data-parallel layer keeps only this rank's slices of it (keep_only).
class AdamW {
 public:
  // [lo, hi) of the index space, held at `at` in the state (and in the
  // gradient step() is given).
  struct Slice {
    int64_t lo = 0, hi = 0, at = 0;
  };
  struct Moments {
    std::vector<float> m, v;
  };

  // Zero moments over all of `layout`, no update taken. `layout` outlives it.
  AdamW(const model::ParamLayout& layout, const AdamWConfig& cfg);

  // Keeps only `slices` of the state, packed in their order (ZeRO-1).
  void keep_only(std::vector<Slice> slices);
  // One update of the kept slices: `grads` packed as the state is (whole:
  // the model's gradient buffer), scaled by grad_scale first (clipping).
  void step(float* params, const float* grads, double lr, float grad_scale);

  // Updates taken: a step skipped for a non-finite gradient takes none, as
  // torch.optim's state["step"] does not advance when its step is skipped.
  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t n) { steps_ = n; }
  // The state: whole, or the kept slices packed.
  Moments& moments() { return moments_; }
  const Moments& moments() const { return moments_; }
  int64_t state_floats() const { return int64_t(moments_.m.size() + moments_.v.size()); }

 private:
  const model::ParamLayout& layout_;
  AdamWConfig cfg_;
  std::vector<Slice> slices_;  // one slice over the whole index space until keep_only
  Moments moments_;
  int64_t steps_ = 0;
};

// sum g^2 in double, summed in fixed-size blocks in a fixed order so the
// value is the same for any thread count (a ZeRO-1 rank sums its shard).
double grad_sum_of_squares(const float* grads, int64_t n);
// sqrt(grad_sum_of_squares).
double grad_global_norm(const float* grads, int64_t n);

// torch.nn.utils.clip_grad_norm_: scale = max_norm / (norm + 1e-6) when the
// norm exceeds max_norm (max_norm <= 0: no clipping).
float clip_scale(double norm, double max_norm);

}  // namespace ggtrain::optim
