#pragma once
#include <cstdint>

#include "model/config.h"
#include "model/params.h"

namespace ggtrain::model {

// Matrices ~ N(0, std^2), with the two projections that write into the
// residual stream (attn_output, ffn_down) scaled by 1/sqrt(2*n_layers) as in
// GPT-2; norm weights = 1. Deterministic in `seed`.
void init_params(const Config& c, const ParamLayout& layout, float* params, uint64_t seed, double std = 0.02);

}  // namespace ggtrain::model
