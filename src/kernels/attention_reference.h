#pragma once
// The previous attention kernel, kept as the reference the flash kernel of
// attention.h is tested against: it stores the full [B, H, T, T]
// probabilities for backward (memory quadratic in T), llm.c style. Query head h reads K/V head
// h / (n_heads / n_kv_heads); K and V are never copied per query head.
//
//   q, out : [B, T, n_heads,    d_head]
//   k, v   : [B, T, n_kv_heads, d_head]
//   att    : [B, n_heads, T, T]   (row t holds softmax over s <= t, 0 after)
//
// Work is cut into tiles of kReferenceAttnTile query rows; each tile is a few small
// GEMMs over the keys up to the tile's end, so only the diagonal tiles
// compute masked-out scores. (b, head) pairs run in parallel and each GEMM is
// single-threaded inside its parallel region.
#include <omp.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/gemm.h"

namespace ggtrain::kernels {

constexpr int64_t kReferenceAttnTile = 64;

// Scratch floats attention_backward needs per thread.
inline int64_t reference_attention_scratch_per_thread(int64_t T) { return kReferenceAttnTile * T; }

// Row-wise causal softmax of rows [r0, r1) of p (row stride T, scores for
// keys [0, r1) present); entries after the diagonal are set to 0.
template <typename T>
void reference_causal_softmax_rows(T* p, int64_t r0, int64_t r1, int64_t Tn) {
  for (int64_t t = r0; t < r1; ++t) {
    T* row = p + t * Tn;
    T maxv = -INFINITY;
    for (int64_t j = 0; j <= t; ++j) maxv = row[j] > maxv ? row[j] : maxv;
    T sum = 0;
    for (int64_t j = 0; j <= t; ++j) {
      row[j] = std::exp(row[j] - maxv);
      sum += row[j];
    }
    const T inv = T(1) / sum;
    for (int64_t j = 0; j <= t; ++j) row[j] *= inv;
    for (int64_t j = t + 1; j < r1; ++j) row[j] = 0;
  }
}

template <typename T>
void reference_attention_forward(T* out, T* att, const T* q, const T* k, const T* v, const AttnShape& s) {
  const int64_t Tn = s.T, hd = s.d_head, qs = s.q_stride(), ks = s.kv_stride();
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const int64_t g = h / s.group();
      const T* qb = q + b * Tn * qs + h * hd;
      const T* kb = k + b * Tn * ks + g * hd;
      const T* vb = v + b * Tn * ks + g * hd;
      T* ob = out + b * Tn * qs + h * hd;
      T* p = att + (b * s.n_heads + h) * Tn * Tn;
      for (int64_t r0 = 0; r0 < Tn; r0 += kReferenceAttnTile) {
        const int64_t r1 = r0 + kReferenceAttnTile < Tn ? r0 + kReferenceAttnTile : Tn;
        // scores[r0:r1, 0:r1] = scale * Q[r0:r1] K[0:r1]^T
        gemm(false, true, r1 - r0, r1, hd, scale, qb + r0 * qs, qs, kb, ks, T(0), p + r0 * Tn, Tn);
        reference_causal_softmax_rows(p, r0, r1, Tn);
        // out[r0:r1] = P[r0:r1, 0:r1] V[0:r1]
        gemm(false, false, r1 - r0, hd, r1, T(1), p + r0 * Tn, Tn, vb, ks, T(0), ob + r0 * qs, qs);
      }
    }
}

// Writes (not accumulates) dq, dk, dv. `scratch` holds omp_get_max_threads()
// * reference_attention_scratch_per_thread(T). Work is split by (batch, kv head), so
// each thread owns the dk/dv rows it accumulates into.
template <typename T>
void reference_attention_backward(T* dq, T* dk, T* dv, T* scratch, const T* dout, const T* q, const T* k, const T* v,
                                  const T* att, const AttnShape& s) {
  const int64_t Tn = s.T, hd = s.d_head, qs = s.q_stride(), ks = s.kv_stride();
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      T* ds = scratch + int64_t(omp_get_thread_num()) * reference_attention_scratch_per_thread(Tn);
      const T* kb = k + b * Tn * ks + g * hd;
      const T* vb = v + b * Tn * ks + g * hd;
      T* dkb = dk + b * Tn * ks + g * hd;
      T* dvb = dv + b * Tn * ks + g * hd;
      for (int64_t t = 0; t < Tn; ++t)
        for (int64_t i = 0; i < hd; ++i) dkb[t * ks + i] = dvb[t * ks + i] = 0;
      for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        const T* qb = q + b * Tn * qs + h * hd;
        const T* dob = dout + b * Tn * qs + h * hd;
        T* dqb = dq + b * Tn * qs + h * hd;
        const T* p = att + (b * s.n_heads + h) * Tn * Tn;
        for (int64_t r0 = 0; r0 < Tn; r0 += kReferenceAttnTile) {
          const int64_t r1 = r0 + kReferenceAttnTile < Tn ? r0 + kReferenceAttnTile : Tn, rows = r1 - r0;
          const T* pt = p + r0 * Tn;
          // dP = dO V^T ; dV += P^T dO
          gemm(false, true, rows, r1, hd, T(1), dob + r0 * qs, qs, vb, ks, T(0), ds, Tn);
          gemm(true, false, r1, hd, rows, T(1), pt, Tn, dob + r0 * qs, qs, T(1), dvb, ks);
          // softmax backward: dS = P * (dP - sum_j P dP), times the score scale
          for (int64_t t = 0; t < rows; ++t) {
            const T* pr = pt + t * Tn;
            T* dr = ds + t * Tn;
            T dot = 0;
            for (int64_t j = 0; j <= r0 + t; ++j) dot += pr[j] * dr[j];
            for (int64_t j = 0; j <= r0 + t; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
            for (int64_t j = r0 + t + 1; j < r1; ++j) dr[j] = 0;
          }
          // dQ = dS K ; dK += dS^T Q
          gemm(false, false, rows, hd, r1, T(1), ds, Tn, kb, ks, T(0), dqb + r0 * qs, qs);
          gemm(true, false, r1, hd, rows, T(1), ds, Tn, qb + r0 * qs, qs, T(1), dkb, ks);
        }
      }
    }
}

}  // namespace ggtrain::kernels
