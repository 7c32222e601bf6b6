#pragma once
// Causal grouped-query attention on explicit buffers (llm.c style: the
// probabilities are kept for backward). Query head h reads K/V head
// h / (n_heads / n_kv_heads); K and V are never copied per query head.
//
//   q, out : [B, T, n_heads,    d_head]
//   k, v   : [B, T, n_kv_heads, d_head]
//   att    : [B, n_heads, T, T]   (row t holds softmax over s <= t)
#include <cmath>
#include <cstdint>

#include <omp.h>

namespace ggtrain::kernels {

struct AttnShape {
  int64_t B, T, n_heads, n_kv_heads, d_head;
  int64_t group() const { return n_heads / n_kv_heads; }
  int64_t q_stride() const { return n_heads * d_head; }   // between positions in q/out
  int64_t kv_stride() const { return n_kv_heads * d_head; }
};

template <typename T>
void attention_forward(T* out, T* att, const T* q, const T* k, const T* v, const AttnShape& s) {
  const int64_t Tn = s.T, hd = s.d_head, qs = s.q_stride(), ks = s.kv_stride();
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const int64_t g = h / s.group();
      const T* kb = k + b * Tn * ks + g * hd;
      const T* vb = v + b * Tn * ks + g * hd;
      for (int64_t t = 0; t < Tn; ++t) {
        const T* qt = q + (b * Tn + t) * qs + h * hd;
        T* p = att + ((b * s.n_heads + h) * Tn + t) * Tn;
        T maxv = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          const T* kj = kb + j * ks;
          T dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t i = 0; i < hd; ++i) dot += qt[i] * kj[i];
          p[j] = dot * scale;
          maxv = p[j] > maxv ? p[j] : maxv;
        }
        T sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          p[j] = std::exp(p[j] - maxv);
          sum += p[j];
        }
        const T inv = T(1) / sum;
        for (int64_t j = 0; j <= t; ++j) p[j] *= inv;
        T* o = out + (b * Tn + t) * qs + h * hd;
        for (int64_t i = 0; i < hd; ++i) o[i] = 0;
        for (int64_t j = 0; j <= t; ++j) {
          const T pj = p[j];
          const T* vj = vb + j * ks;
#pragma omp simd
          for (int64_t i = 0; i < hd; ++i) o[i] += pj * vj[i];
        }
      }
    }
}

// Writes (not accumulates) dq, dk, dv. `dp_scratch` holds omp_get_max_threads() * T.
// Work is split by (batch, kv head) so each thread owns its dk/dv rows.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, T* dp_scratch, const T* dout, const T* q,
                        const T* k, const T* v, const T* att, const AttnShape& s) {
  const int64_t Tn = s.T, hd = s.d_head, qs = s.q_stride(), ks = s.kv_stride();
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      T* dp = dp_scratch + int64_t(omp_get_thread_num()) * Tn;
      const T* kb = k + b * Tn * ks + g * hd;
      const T* vb = v + b * Tn * ks + g * hd;
      T* dkb = dk + b * Tn * ks + g * hd;
      T* dvb = dv + b * Tn * ks + g * hd;
      for (int64_t t = 0; t < Tn; ++t)
        for (int64_t i = 0; i < hd; ++i) dkb[t * ks + i] = dvb[t * ks + i] = 0;
      for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        for (int64_t t = 0; t < Tn; ++t) {
          const T* p = att + ((b * s.n_heads + h) * Tn + t) * Tn;
          const T* dot_ = dout + (b * Tn + t) * qs + h * hd;
          const T* qt = q + (b * Tn + t) * qs + h * hd;
          T* dqt = dq + (b * Tn + t) * qs + h * hd;
          // dp[j] = dout_t . v_j ; dv_j += p[j] * dout_t
          T pdp = 0;
          for (int64_t j = 0; j <= t; ++j) {
            const T* vj = vb + j * ks;
            T* dvj = dvb + j * ks;
            T dot = 0;
            const T pj = p[j];
#pragma omp simd reduction(+ : dot)
            for (int64_t i = 0; i < hd; ++i) {
              dot += dot_[i] * vj[i];
              dvj[i] += pj * dot_[i];
            }
            dp[j] = dot;
            pdp += pj * dot;
          }
          // softmax backward, then through the scaled dot products
          for (int64_t i = 0; i < hd; ++i) dqt[i] = 0;
          for (int64_t j = 0; j <= t; ++j) {
            const T ds = p[j] * (dp[j] - pdp) * scale;
            const T* kj = kb + j * ks;
            T* dkj = dkb + j * ks;
#pragma omp simd
            for (int64_t i = 0; i < hd; ++i) {
              dqt[i] += ds * kj[i];
              dkj[i] += ds * qt[i];
            }
          }
        }
      }
    }
}

}  // namespace ggtrain::kernels
