#include "model/init.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "util/rng.h"

namespace ggtrain::model {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void init_params(const Config& c, const ParamLayout& layout, float* params, uint64_t seed, double std) {
  Rng rng(seed);
  const double residual_std = std / std::sqrt(2.0 * double(c.n_layers));
  for (const auto& t : layout.tensors()) {
    float* p = params + t.offset;
    if (ends_with(t.name, ".ssm_a")) {  // -A with A uniform in [1, 16], as Qwen3.5's A_log starts
      for (int64_t i = 0; i < t.size; ++i) p[i] = -float(1.0 + 15.0 * rng.uniform());
      continue;
    }
    if (ends_with(t.name, ".ssm_dt.bias")) {  // softplus(bias) = dt, dt log-uniform in [1e-3, 0.1]
      for (int64_t i = 0; i < t.size; ++i) {
        const double dt = std::exp(std::log(1e-3) + rng.uniform() * (std::log(0.1) - std::log(1e-3)));
        p[i] = float(dt + std::log(-std::expm1(-dt)));
      }
      continue;
    }
    if (t.shape.size() == 1) {  // norm weights start at 1, biases at 0
      std::fill(p, p + t.size, ends_with(t.name, ".bias") ? 0.0f : 1.0f);
      continue;
    }
    if (ends_with(t.name, ".ssm_conv1d.weight")) {  // a depthwise conv's default: uniform within 1/sqrt(taps)
      const double bound = 1.0 / std::sqrt(double(t.shape[1]));
      for (int64_t i = 0; i < t.size; ++i) p[i] = float(bound * (2.0 * rng.uniform() - 1.0));
      continue;
    }
    const bool residual_proj = ends_with(t.name, "attn_output.weight") || ends_with(t.name, "ffn_down.weight") ||
                               ends_with(t.name, "ssm_out.weight");
    const double s = residual_proj ? residual_std : std;
    for (int64_t i = 0; i < t.size; ++i) p[i] = float(rng.normal() * s);
  }
}

}  // namespace ggtrain::model
