#pragma once
// LFM2's double-gated short convolution, the mixer of its convolution
// layers, as llama.cpp's graph computes it (build_shortconv_block):
//   (b | c | x) = in_proj(h)        one row of 3C per position
//   u[t] = b[t] * x[t]              the convolution's input ("bx")
//   v[t, ch] = sum_j w[ch, j] u[t - (taps - 1) + j, ch]   causal, depthwise
//   y[t] = c[t] * v[t]              then out_proj(y)
// Positions before the sequence (or before the position's document, in a
// packed batch) read as zeros: llama.cpp starts each sequence with a zero
// state. The sum runs over j in order in the element type, as ggml_ssm_conv.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/parallel.h"

namespace ggtrain::kernels {

struct ShortConvShape {
  int64_t batch = 1;  // rows of the batch, each a sequence of `seq` positions
  int64_t seq = 0;
  int64_t channels = 0;  // C
  int64_t taps = 0;  // the kernel's width (GGUF <arch>.shortconv.l_cache)
  // [batch, seq]: the first position of each position's document; null: one
  // document per row.
  const int32_t* doc_start = nullptr;
  // Positions [0, first) of each row are already in u (a decoder's history);
  // bcx, v and y hold rows first..seq-1 only.
  int64_t first = 0;
};

namespace detail {
inline int64_t conv_doc_first(const ShortConvShape& s, int64_t b, int64_t t) {
  return s.doc_start ? s.doc_start[b * s.seq + t] : 0;
}
}  // namespace detail

// u (rows first..seq-1 of each row, [batch, seq, C]) from bcx; then v and y.
// v may be null (the decoder keeps no copy).
template <typename T, typename Out>
void short_conv_forward(Out* y, T* v, T* u, const T* bcx, const T* w, const ShortConvShape& s) {
  const int64_t C = s.channels, L = s.taps, n = s.seq - s.first;
#pragma omp parallel for schedule(static) if (s.batch * n * C >= kMinParallelWork)
  for (int64_t r = 0; r < s.batch * n; ++r) {
    const int64_t b = r / n, t = s.first + r % n;
    const T* g = bcx + r * 3 * C;
    T* ur = u + (b * s.seq + t) * C;
    for (int64_t ch = 0; ch < C; ++ch) ur[ch] = g[ch] * g[2 * C + ch];
  }
#pragma omp parallel for schedule(static) if (s.batch * n * C >= kMinParallelWork)
  for (int64_t r = 0; r < s.batch * n; ++r) {
    const int64_t b = r / n, t = s.first + r % n, first = detail::conv_doc_first(s, b, t);
    const T* c = bcx + r * 3 * C + C;
    for (int64_t ch = 0; ch < C; ++ch) {
      T acc = T(0);
      for (int64_t j = 0; j < L; ++j) {
        const int64_t src = t - (L - 1) + j;
        if (src >= first) acc += w[ch * L + j] * u[(b * s.seq + src) * C + ch];
      }
      if (v) v[r * C + ch] = acc;
      store(y + r * C + ch, c[ch] * acc);
    }
  }
}

// From dy ([batch*seq, C], d(loss)/d(y)): d_bcx ([batch*seq, 3C], written)
// and dw ([C, taps], added to; null when the kernel is frozen). dv: scratch
// [batch*seq, C]. Training only (first == 0). Every sum runs in a fixed
// order, so the result does not depend on the thread count.
template <typename T>
void short_conv_backward(T* d_bcx, T* dw, T* dv, const T* dy, const T* bcx, const T* v, const T* u, const T* w,
                         const ShortConvShape& s) {
  const int64_t C = s.channels, L = s.taps, rows = s.batch * s.seq;
  const bool par = rows * C >= kMinParallelWork;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t ch = 0; ch < C; ++ch) {
      d_bcx[r * 3 * C + C + ch] = dy[r * C + ch] * v[r * C + ch];  // dc
      dv[r * C + ch] = dy[r * C + ch] * bcx[r * 3 * C + C + ch];
    }
    // du[src] = sum over the outputs t = src + (taps - 1) - j that read it
    // (same row, src inside t's document), then through u = b * x.
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / s.seq, src = r % s.seq;
    const T* g = bcx + r * 3 * C;
    for (int64_t ch = 0; ch < C; ++ch) {
      T du = T(0);
      for (int64_t j = 0; j < L; ++j) {
        const int64_t t = src + (L - 1) - j;
        if (t < s.seq && src >= detail::conv_doc_first(s, b, t)) du += w[ch * L + j] * dv[(b * s.seq + t) * C + ch];
      }
      d_bcx[r * 3 * C + ch] = du * g[2 * C + ch];  // db
      d_bcx[r * 3 * C + 2 * C + ch] = du * g[ch];  // dx
    }
  }
  if (!dw) return;
  constexpr int64_t kBlock = 16;  // channels per work item: each thread owns its channels' sums
#pragma omp parallel for schedule(static) if (par)
  for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
    const int64_t c1 = std::min(C, c0 + kBlock);
    std::vector<T> acc(size_t((c1 - c0) * L), T(0));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / s.seq, t = r % s.seq, first = detail::conv_doc_first(s, b, t);
      for (int64_t j = 0; j < L; ++j) {
        const int64_t src = t - (L - 1) + j;
        if (src < first) continue;
        const T* us = u + (b * s.seq + src) * C;
        for (int64_t ch = c0; ch < c1; ++ch) acc[size_t((ch - c0) * L + j)] += dv[r * C + ch] * us[ch];
      }
    }
    for (int64_t ch = c0; ch < c1; ++ch)
      for (int64_t j = 0; j < L; ++j) dw[ch * L + j] += acc[size_t((ch - c0) * L + j)];
  }
}

}  // namespace ggtrain::kernels
