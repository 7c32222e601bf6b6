#pragma once
// Rotary position embedding in llama.cpp's two layouts: "normal" (ggml rope
// mode 0, LLM_ARCH_LLAMA) rotates ADJACENT pairs (x[2i], x[2i+1]) of each
// head, NeoX (mode 2: qwen2, qwen3, gemma3) rotates the pairs (x[i],
// x[i + n_rot/2]); pair i turns by p * base^(-2i/n_rot) in both. n_rot, the
// rotated dimensions (GGUF rope.dimension_count), is the head size unless
// the model rotates only the first part of each head ("partial RoPE"); the
// rest passes unchanged, as in ggml_rope_ext.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/parallel.h"

namespace ggtrain::kernels {

// cos/sin tables [T, n_rot/2], computed in double then rounded once.
// freq_factors: null, or n_rot/2 divisors of the pairs' angles (llama.cpp's
// rope_freqs.weight, which Llama 3.x files carry for their "llama3" RoPE
// scaling: ggml_rope_ext divides pair i's angle by factor i).
// linear_factor: linear RoPE scaling, every position divided by it
// (ggml's freq_scale = 1 / factor).
template <typename T>
void rope_tables(T* cos_t, T* sin_t, int64_t n_pos, int64_t n_rot, double base, const float* freq_factors = nullptr,
                 double linear_factor = 1.0) {
  const int64_t half = n_rot / 2;
  for (int64_t p = 0; p < n_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      double theta = double(p) / linear_factor * std::pow(base, -2.0 * double(i) / double(n_rot));
      if (freq_factors) theta /= double(freq_factors[i]);
      cos_t[p * half + i] = T(std::cos(theta));
      sin_t[p * half + i] = T(std::sin(theta));
    }
}

// In place on x[B, T, n_heads, d_head]. direction +1 rotates (forward),
// -1 rotates back, which is exactly the backward pass of a rotation.
// halves: the NeoX pairing. n_rot: the rotated dimensions (0: all).
template <typename T>
void rope_apply(T* x, const T* cos_t, const T* sin_t, int64_t B, int64_t Tn, int64_t n_heads, int64_t d_head,
                int direction, bool halves = false, int64_t n_rot = 0) {
  const int64_t half = (n_rot > 0 ? n_rot : d_head) / 2;
  // Pair i is (x[i * step], x[i * step + other]).
  const int64_t step = halves ? 1 : 2, other = halves ? half : 1;
  const T sgn = direction > 0 ? T(1) : T(-1);
#pragma omp parallel for collapse(2) if (B * Tn * n_heads * d_head >= kMinParallelWork)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t) {
      const T* cs = cos_t + t * half;
      const T* sn = sin_t + t * half;
      T* row = x + (b * Tn + t) * n_heads * d_head;
      for (int64_t h = 0; h < n_heads; ++h) {
        T* xh = row + h * d_head;
        for (int64_t i = 0; i < half; ++i) {
          T* x0p = xh + i * step;
          const T x0 = x0p[0], x1 = x0p[other];
          const T c = cs[i], s = sgn * sn[i];
          x0p[0] = x0 * c - x1 * s;
          x0p[other] = x0 * s + x1 * c;
        }
      }
    }
}

template <typename T>
void rope_forward(T* x, const T* cos_t, const T* sin_t, int64_t B, int64_t Tn, int64_t H, int64_t hd,
                  bool halves = false, int64_t n_rot = 0) {
  rope_apply(x, cos_t, sin_t, B, Tn, H, hd, +1, halves, n_rot);
}

template <typename T>
void rope_backward(T* dx, const T* cos_t, const T* sin_t, int64_t B, int64_t Tn, int64_t H, int64_t hd,
                   bool halves = false, int64_t n_rot = 0) {
  rope_apply(dx, cos_t, sin_t, B, Tn, H, hd, -1, halves, n_rot);
}

}  // namespace ggtrain::kernels
