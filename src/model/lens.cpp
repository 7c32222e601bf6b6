#include "model/lens.h"

#include <algorithm>

namespace ggtrain::model {

namespace {

// Vocabulary rows folded together, so each row of W^T is read from memory
// once per tile rather than once per token.
constexpr int64_t kRowTile = 16;

}  // namespace

std::vector<float> fold_lens(const float* E, int64_t vocab, int64_t donor_dim, const float* W, int64_t d_model) {
  // W^T in double: the inner loop then runs over r with one independent
  // accumulator per output element (vectorizable, and each sum still goes
  // over c in order, so the result does not depend on the tiling).
  std::vector<double> wt(size_t(donor_dim * d_model));
  for (int64_t r = 0; r < d_model; ++r)
    for (int64_t c = 0; c < donor_dim; ++c) wt[size_t(c * d_model + r)] = double(W[r * donor_dim + c]);
  std::vector<float> out(size_t(vocab * d_model));
  const int64_t n_tiles = (vocab + kRowTile - 1) / kRowTile;
#pragma omp parallel for schedule(dynamic) if (vocab * d_model * donor_dim >= (1 << 20))
  for (int64_t tile = 0; tile < n_tiles; ++tile) {
    const int64_t v0 = tile * kRowTile, v1 = std::min(vocab, v0 + kRowTile);
    std::vector<double> acc(size_t((v1 - v0) * d_model), 0.0);
    for (int64_t c = 0; c < donor_dim; ++c) {
      const double* wrow = wt.data() + c * d_model;
      for (int64_t v = v0; v < v1; ++v) {
        const double e = double(E[v * donor_dim + c]);
        double* a = acc.data() + (v - v0) * d_model;
        for (int64_t r = 0; r < d_model; ++r) a[r] += e * wrow[r];
      }
    }
    for (int64_t i = 0; i < (v1 - v0) * d_model; ++i) out[size_t(v0 * d_model + i)] = float(acc[size_t(i)]);
  }
  return out;
}

}  // namespace ggtrain::model
