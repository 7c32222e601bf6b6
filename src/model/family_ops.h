#pragma once
// The operations whose form an architecture row chooses, shared by the
// training passes (model/transformer.cpp) and the decoder (infer/decoder.cpp).
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/rope.h"
#include "model/config.h"

namespace ggtrain::model {

// act = f(gate) * up, f the family's feed-forward activation; and its backward.
template <typename T, typename Out>
void ffn_gate_forward(FfnActivation f, Out* act, const T* gate, const T* up, int64_t n) {
  if (f == FfnActivation::kGeluTanh) return kernels::geglu_forward(act, gate, up, n);
  kernels::swiglu_forward(act, gate, up, n);
}
template <typename T, typename Out>
void ffn_gate_backward(FfnActivation f, Out* dgate, Out* dup, const T* dact, const T* gate, const T* up, int64_t n) {
  if (f == FfnActivation::kGeluTanh) return kernels::geglu_backward(dgate, dup, dact, gate, up, n);
  kernels::swiglu_backward(dgate, dup, dact, gate, up, n);
}

// The RoPE tables [n_pos, n_rot/2] of the global or the local layers (Config::rope).
template <typename T>
void layer_rope_tables(const Config& c, bool local, T* cos_t, T* sin_t, int64_t n_pos) {
  const Config::Rope r = c.rope(local);
  kernels::rope_tables(cos_t, sin_t, n_pos, c.n_rot(), r.base, r.freq_factors, r.linear_factor);
}

}  // namespace ggtrain::model
