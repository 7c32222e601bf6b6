#pragma once
// The operations whose form an architecture row chooses, shared by the
// training passes (model/transformer*.cpp) and the decoder (infer/decoder*.cpp).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"
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

// Gated attention (Architecture::attn_output_gate): attn_q's output
// q_full [rows, 2 hd] holds per head [query | gate]; split into q and gate
// [rows, hd] each (rows: positions x heads).
template <typename T>
void split_query_gate(T* q, T* gate, const T* q_full, int64_t rows, int64_t hd) {
#pragma omp parallel for schedule(static) if (rows * hd >= kernels::kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(q_full + 2 * r * hd, q_full + (2 * r + 1) * hd, q + r * hd);
    std::copy(q_full + (2 * r + 1) * hd, q_full + (2 * r + 2) * hd, gate + r * hd);
  }
}
// out = o sigmoid(gate), elementwise over n (out may be o).
template <typename T, typename Out>
void apply_output_gate(Out* out, const T* o, const T* gate, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kernels::kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) kernels::store(out + i, o[i] / (T(1) + std::exp(-gate[i])));
}

// The RoPE tables [n_pos, n_rot/2] of the global or the local layers (Config::rope).
template <typename T>
void layer_rope_tables(const Config& c, bool local, T* cos_t, T* sin_t, int64_t n_pos) {
  const Config::Rope r = c.rope(local);
  kernels::rope_tables(cos_t, sin_t, n_pos, c.n_rot(), r.base, r.freq_factors, r.linear_factor);
}

}  // namespace ggtrain::model
