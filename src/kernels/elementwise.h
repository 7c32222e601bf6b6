#pragma once
// Small fused element-wise layers: SwiGLU, GeGLU, residual add, bias, embedding lookup.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/bf16.h"
#include "kernels/parallel.h"
#include "kernels/vexp.h"

namespace ggtrain::kernels {

namespace detail {

constexpr int64_t kElementBlock = 4096;  // elements per parallel work item

// fn(i0, i1) over blocks of kElementBlock elements of [0, n), in parallel
// when n is worth it.
template <typename Fn>
void for_element_blocks(int64_t n, Fn&& fn) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelWork)
  for (int64_t i0 = 0; i0 < n; i0 += kElementBlock) fn(i0, std::min(n, i0 + kElementBlock));
}

// Vector bodies of SwiGLU for float on [i0, i1): the scalar loops call expf
// per element, which cost as much as the GEMMs around them.
template <typename Out>
void swiglu_forward_f32(Out* act, const float* gate, const float* up, int64_t i0, int64_t i1) {
  int64_t i = i0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.f);
  for (; i + 16 <= i1; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    store16(act + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
#endif
  for (; i < i1; ++i) store(act + i, gate[i] / (1.f + std::exp(-gate[i])) * up[i]);
}

template <typename Out>
void swiglu_backward_f32(Out* dgate, Out* dup, const float* dact, const float* gate, const float* up, int64_t i0,
                         int64_t i1) {
  int64_t i = i0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.f);
  for (; i + 16 <= i1; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i), d = _mm512_loadu_ps(dact + i);
    const __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    store16(dup + i, _mm512_mul_ps(d, _mm512_mul_ps(g, sig)));
    const __m512 k = _mm512_fmadd_ps(g, _mm512_sub_ps(one, sig), one);  // 1 + g (1 - sig)
    store16(dgate + i, _mm512_mul_ps(_mm512_mul_ps(d, _mm512_loadu_ps(up + i)), _mm512_mul_ps(sig, k)));
  }
#endif
  for (; i < i1; ++i) {
    const float g = gate[i], sig = 1.f / (1.f + std::exp(-g));
    store(dup + i, dact[i] * g * sig);
    store(dgate + i, dact[i] * up[i] * sig * (1.f + g * (1.f - sig)));
  }
}

// GELU's tanh approximation as x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715
// x^3): the same function as 0.5 x (1 + tanh(u)), without tanh's
// cancellation near 0, and one exp like SiLU.
constexpr double kGeluK0 = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluK1 = 0.044715;

// sigmoid(2u) of gate g (gelu_tanh(g) = g * gelu_sigmoid(g)), and
// d gelu_tanh / dg from g and that s: the scalar forms every type's loop uses.
template <typename T>
T gelu_sigmoid(T g) {
  const T k0 = T(kGeluK0), k1 = T(kGeluK1);
  return T(1) / (T(1) + std::exp(T(-2) * k0 * (g + k1 * g * g * g)));
}
template <typename T>
T gelu_derivative(T g, T s) {
  const T k0 = T(kGeluK0), k1 = T(kGeluK1);
  return s + g * s * (T(1) - s) * T(2) * k0 * (T(1) + T(3) * k1 * g * g);
}

// Elements [i0, i1) one at a time, in T (the float paths' tails, all of the double ones).
template <typename T, typename Out>
void geglu_forward_scalar(Out* act, const T* gate, const T* up, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) store(act + i, gate[i] * gelu_sigmoid(gate[i]) * up[i]);
}
template <typename T, typename Out>
void geglu_backward_scalar(Out* dgate, Out* dup, const T* dact, const T* gate, const T* up, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const T g = gate[i], s = gelu_sigmoid(g);
    store(dup + i, dact[i] * g * s);
    store(dgate + i, dact[i] * up[i] * gelu_derivative(g, s));
  }
}

template <typename Out>
void geglu_forward_f32(Out* act, const float* gate, const float* up, int64_t i0, int64_t i1) {
  int64_t i = i0;
#if defined(__AVX512F__)
  const float k0 = float(kGeluK0), k1 = float(kGeluK1);
  const __m512 one = _mm512_set1_ps(1.f), m2k0 = _mm512_set1_ps(-2.f * k0), vk1 = _mm512_set1_ps(k1);
  for (; i + 16 <= i1; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(vk1, g), _mm512_mul_ps(g, g), g);  // g + k1 g^3
    const __m512 e = exp16(_mm512_mul_ps(m2k0, inner));  // exp(-2u)
    store16(act + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
#endif
  geglu_forward_scalar(act, gate, up, i, i1);
}

template <typename Out>
void geglu_backward_f32(Out* dgate, Out* dup, const float* dact, const float* gate, const float* up, int64_t i0,
                        int64_t i1) {
  int64_t i = i0;
#if defined(__AVX512F__)
  const float k0 = float(kGeluK0), k1 = float(kGeluK1);
  const __m512 one = _mm512_set1_ps(1.f), m2k0 = _mm512_set1_ps(-2.f * k0), vk1 = _mm512_set1_ps(k1);
  const __m512 two_k0 = _mm512_set1_ps(2.f * k0), three_k1 = _mm512_set1_ps(3.f * k1);
  for (; i + 16 <= i1; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i), d = _mm512_loadu_ps(dact + i), g2 = _mm512_mul_ps(g, g);
    const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(vk1, g), g2, g);
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_mul_ps(m2k0, inner))));
    store16(dup + i, _mm512_mul_ps(d, _mm512_mul_ps(g, s)));
    // gelu'(g) = s + g s (1 - s) 2 k0 (1 + 3 k1 g^2)
    const __m512 du = _mm512_mul_ps(two_k0, _mm512_fmadd_ps(three_k1, g2, one));
    const __m512 deriv = _mm512_fmadd_ps(_mm512_mul_ps(g, s), _mm512_mul_ps(_mm512_sub_ps(one, s), du), s);
    store16(dgate + i, _mm512_mul_ps(_mm512_mul_ps(d, _mm512_loadu_ps(up + i)), deriv));
  }
#endif
  geglu_backward_scalar(dgate, dup, dact, gate, up, i, i1);
}

}  // namespace detail

// act = gelu_tanh(gate) * up, all [n] (Gemma's GeGLU). act may be bf16 (Out).
template <typename T, typename Out>
void geglu_forward(Out* act, const T* gate, const T* up, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    detail::for_element_blocks(n, [&](int64_t i0, int64_t i1) { detail::geglu_forward_f32(act, gate, up, i0, i1); });
  else detail::geglu_forward_scalar(act, gate, up, 0, n);
}

// dgate, dup (written) from dact; stored as Out.
template <typename T, typename Out>
void geglu_backward(Out* dgate, Out* dup, const T* dact, const T* gate, const T* up, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    detail::for_element_blocks(
        n, [&](int64_t i0, int64_t i1) { detail::geglu_backward_f32(dgate, dup, dact, gate, up, i0, i1); });
  else detail::geglu_backward_scalar(dgate, dup, dact, gate, up, 0, n);
}

// act = silu(gate) * up, all [n]. act may be stored as bf16 (Out): it
// only feeds the down projection.
template <typename T, typename Out>
void swiglu_forward(Out* act, const T* gate, const T* up, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    detail::for_element_blocks(n, [&](int64_t i0, int64_t i1) { detail::swiglu_forward_f32(act, gate, up, i0, i1); });
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelWork)
    for (int64_t i = 0; i < n; ++i) {
      const T g = gate[i];
      store(act + i, g / (T(1) + std::exp(-g)) * up[i]);
    }
  }
}

// dgate, dup (written) from dact; stored as Out (bf16 when they feed bf16 GEMMs).
template <typename T, typename Out>
void swiglu_backward(Out* dgate, Out* dup, const T* dact, const T* gate, const T* up, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    detail::for_element_blocks(
        n, [&](int64_t i0, int64_t i1) { detail::swiglu_backward_f32(dgate, dup, dact, gate, up, i0, i1); });
  } else {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const T g = gate[i];
      const T sig = T(1) / (T(1) + std::exp(-g));
      const T silu = g * sig;
      store(dup + i, dact[i] * silu);
      store(dgate + i, dact[i] * up[i] * sig * (T(1) + g * (T(1) - sig)));
    }
  }
}

// out = a + b
template <typename T>
void residual_forward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// y[N, C] += b[C] on every row (a linear layer's bias).
template <typename T>
void bias_forward(T* y, const T* b, int64_t N, int64_t C) {
#pragma omp parallel for if (N * C >= kMinParallelWork)
  for (int64_t n = 0; n < N; ++n) {
    T* row = y + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) row[c] += b[c];
  }
}

// db[C] += sum over rows of dy[N, C], each channel summed in row order (the
// result does not depend on the thread count).
template <typename T>
void bias_backward(T* db, const T* dy, int64_t N, int64_t C) {
  constexpr int64_t kChunk = 64;
#pragma omp parallel for if (N * C >= kMinParallelWork)
  for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
    const int64_t c1 = std::min(c0 + kChunk, C);
    T acc[kChunk] = {};
    for (int64_t n = 0; n < N; ++n)
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += dy[n * C + c];
    for (int64_t c = c0; c < c1; ++c) db[c] += acc[c - c0];
  }
}

// y += a * x, all [n].
template <typename T>
void axpy(T* y, T a, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// x *= a, all [n].
template <typename T>
void scale_inplace(T* x, T a, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

// x[N, C] = table[tokens[n]]
template <typename T>
void embedding_forward(T* x, const int32_t* tokens, const T* table, int64_t N, int64_t C) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) std::memcpy(x + n * C, table + int64_t(tokens[n]) * C, C * sizeof(T));
}

// dtable[tokens[n]] += dx[n]. Parallel over channel chunks, rows in order:
// deterministic whatever the thread count, no atomics.
template <typename T>
void embedding_backward(T* dtable, const T* dx, const int32_t* tokens, int64_t N, int64_t C) {
  constexpr int64_t kChunk = 16;
#pragma omp parallel for
  for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
    const int64_t c1 = c0 + kChunk < C ? c0 + kChunk : C;
    for (int64_t n = 0; n < N; ++n) {
      T* row = dtable + int64_t(tokens[n]) * C;
      for (int64_t c = c0; c < c1; ++c) row[c] += dx[n * C + c];
    }
  }
}

}  // namespace ggtrain::kernels
