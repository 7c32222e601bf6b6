#pragma once
// The rounding and scale searches ggml's reference quantizers share
// (nearest_int, make_qx_quants, make_qkx2_quants in ggml-quants.c),
// rewritten with the same float operations in the same order: the K-quant
// bytes depend on every intermediate rounding. Files using these are
// compiled with -ffp-contract=off (ggml's are built without FMA).
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ggtrain::quant::detail {

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS

// Round to nearest, ties to even, for |f| <= 4194303 (adding 1.5 * 2^23
// leaves the integer in the low mantissa bits).
inline int nearest_int(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

template <typename T>
inline T clamp_to(T v, T lo, T hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// Symmetric quants L in [0, 2 nmax) for n values, the scale chosen by a
// search over 19 candidates weighted by x^2 (rmse_type 1), or by `qw` when
// given (an importance matrix): the Q6_K sub-block search, and with weights
// the Q4_0/Q5_0 block search.
float symmetric_scale_search(int n, int nmax, const float* x, int8_t* L, const float* qw = nullptr);

// Asymmetric quants L in [0, nmax] with a min: the Q4_K/Q5_K sub-block
// search (make_qkx2_quants, squared error). Returns the scale; *neg_min is
// minus the chosen offset.
float offset_scale_search(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min,
                          uint8_t* aux, float rmin, float rdelta, int nstep);

// Non-negative quants L in [0, nmax] of n non-negative values (a super-block's
// sub-block scales or mins) under one scale, minimising the error weighted
// by `weights`, then refined value by value (make_qp_quants). Returns the scale.
float positive_scale_search(int n, int nmax, const float* x, uint8_t* L, const float* weights);

}  // namespace ggtrain::quant::detail
