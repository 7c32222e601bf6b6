#pragma once
// Small fused element-wise layers: SwiGLU, residual add, embedding lookup.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/parallel.h"

namespace ggtrain::kernels {

// act = silu(gate) * up, all [n].
template <typename T>
void swiglu_forward(T* act, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i];
    act[i] = g / (T(1) + std::exp(-g)) * up[i];
  }
}

// dgate, dup (written) from dact.
template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dact, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T sig = T(1) / (T(1) + std::exp(-g));
    const T silu = g * sig;
    dup[i] = dact[i] * silu;
    dgate[i] = dact[i] * up[i] * sig * (T(1) + g * (T(1) - sig));
  }
}

// out = a + b
template <typename T>
void residual_forward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
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
