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
    if (t.shape.size() == 1) {  // norm weights start at 1, biases at 0
      std::fill(p, p + t.size, ends_with(t.name, ".bias") ? 0.0f : 1.0f);
      continue;
    }
    const bool residual_proj = ends_with(t.name, "attn_output.weight") || ends_with(t.name, "ffn_down.weight");
    const double s = residual_proj ? residual_std : std;
    for (int64_t i = 0; i < t.size; ++i) p[i] = float(rng.normal() * s);
  }
}

}  // namespace ggtrain::model
