#pragma once
// Folding a projection lens into an embedding table. A model warm-started
// from a donor sees token v as x = W E[v] (E [vocab, donor_dim] the donor's
// table, W [d_model, donor_dim] the lens, `lens.proj.weight`); the equivalent
// standard llama table is T[v, r] = sum_c E[v, c] * W[r, c]. Computed exactly:
// each product of two floats is exact in double, summed in double in the
// order c = 0, 1, ..., and rounded to float once.
#include <cstdint>
#include <vector>

namespace ggtrain::model {

// E row-major [vocab, donor_dim], W row-major [d_model, donor_dim] (ggml ne
// [donor_dim, d_model]); returns T row-major [vocab, d_model].
std::vector<float> fold_lens(const float* E, int64_t vocab, int64_t donor_dim, const float* W, int64_t d_model);

}  // namespace ggtrain::model
