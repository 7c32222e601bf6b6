#pragma once
// Causal grouped-query attention, flash-attention style (Dao et al., 2022):
// the T x T probabilities are never stored, so memory grows linearly with
// the context. Forward walks each tile of query rows over blocks of keys with
// an online softmax and saves only each row's log-sum-exp; backward
// recomputes the scores block by block from q, k and that log-sum-exp.
// Query head h reads K/V head h / (n_heads / n_kv_heads); K and V are never
// copied per query head.
//
//   q, out : [B, T, n_heads,    d_head]
//   k, v   : [B, T, n_kv_heads, d_head]
//   lse    : [B, n_heads, T]   log sum_{s <= t} exp(scale q_t . k_s)
//
// With AttnShape::doc_start (packed examples, per-document attention) query
// t sees only keys [doc_start[t], t]: attention never crosses a document
// boundary, and key blocks that end before the first document of a query
// tile are never computed, so packing costs no extra FLOPs.
//
// Each (tile, key block) step is a few small GEMMs, single-threaded inside
// the parallel region over (batch, head); only diagonal blocks compute
// masked-out scores. Blocks past the diagonal are skipped.
#include <omp.h>

#include <cmath>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/gemm.h"
#include "kernels/vexp.h"

namespace ggtrain::kernels {

struct AttnShape {
  int64_t B, T, n_heads, n_kv_heads, d_head;
  // Query rows per tile and keys per block: 64 x 256 floats of scores stay
  // in L2 with the q, k, v rows they come from. Tests shrink them to reach
  // every case (several blocks per row, rows that see none of a block).
  int64_t tile_rows = 64, tile_cols = 256;
  // [B, T] the first position of each position's document, non-decreasing
  // along a row and at most the position itself; null: one document per row.
  const int32_t* doc_start = nullptr;
  int64_t group() const { return n_heads / n_kv_heads; }
  int64_t q_stride() const { return n_heads * d_head; }  // between positions in q/out
  int64_t kv_stride() const { return n_kv_heads * d_head; }
};

// Scratch elements attention_forward/backward need per thread.
inline int64_t attention_scratch_per_thread(const AttnShape& s) {
  return 2 * s.tile_rows * s.tile_cols + 2 * s.tile_rows + s.tile_rows * s.d_head;
}

namespace detail {

// Of the keys [c0, c0 + cols) of a block, those query t sees, as offsets
// [lo, hi) into the block (empty when hi <= lo): its document's start (0
// without documents) up to t. `starts` is the batch row's doc_start or null.
struct VisibleCols {
  int64_t lo, hi;
  int64_t n() const { return hi > lo ? hi - lo : 0; }
};
inline VisibleCols visible_cols(const int32_t* starts, int64_t t, int64_t c0, int64_t cols) {
  auto offset = [&](int64_t key) { return key < c0 ? 0 : (key - c0 < cols ? key - c0 : cols); };
  return {offset(starts ? starts[t] : 0), offset(t + 1)};
}

// The first key block a tile of rows [r0, r0 + rows) computes: the block
// holding its earliest document start (0 without documents).
inline int64_t first_key_block(const int32_t* starts, int64_t r0, int64_t rows, int64_t block) {
  if (!starts) return 0;
  int64_t first = starts[r0];
  for (int64_t t = r0 + 1; t < r0 + rows; ++t) first = starts[t] < first ? starts[t] : first;
  return first / block * block;
}

// Zeroes the entries of a row of scores outside [vc.lo, vc.hi) of `cols`.
template <typename T>
void zero_outside(T* row, VisibleCols vc, int64_t cols) {
  for (int64_t j = 0; j < vc.lo && j < cols; ++j) row[j] = 0;
  for (int64_t j = vc.hi > vc.lo ? vc.hi : vc.lo; j < cols; ++j) row[j] = 0;
}

// One block of the online softmax for rows [r0, r0 + rows): s holds the
// scaled scores (row stride ld) and becomes the unnormalised probabilities
// exp(s - m_new); m and l (running max and sum) are updated and the output
// rows (stride os) rescaled by exp(m_old - m_new).
template <typename T>
void online_softmax_block(T* s, int64_t ld, T* m, T* l, T* o, int64_t os, int64_t hd, int64_t r0, int64_t rows,
                          int64_t c0, int64_t cols, const int32_t* starts) {
  for (int64_t t = 0; t < rows; ++t) {
    T* row = s + t * ld;
    const VisibleCols vc = visible_cols(starts, r0 + t, c0, cols);
    const int64_t n = vc.n();
    zero_outside(row, vc, cols);
    if (n == 0) continue;
    const T mx = max_of(row + vc.lo, n);
    const T m_new = mx > m[t] ? mx : m[t];
    const T sum = exp_shift_sum(row + vc.lo, n, m_new);
    const T alpha = std::exp(m[t] - m_new);  // 0 on the first block (m = -inf)
    l[t] = l[t] * alpha + sum;
    m[t] = m_new;
    if (alpha != T(1)) {
      T* orow = o + t * os;
      for (int64_t i = 0; i < hd; ++i) orow[i] *= alpha;
    }
  }
}

// Backward pieces shared by the float and bf16 kernels (attention_bf16.h).

// dk and dv rows of one (batch, kv head) zeroed before they accumulate.
template <typename T>
void zero_kv_rows(T* dk, T* dv, int64_t n_rows, int64_t hd, int64_t stride) {
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t i = 0; i < hd; ++i) dk[t * stride + i] = dv[t * stride + i] = 0;
}

// D[t] = dO[t] . O[t] for the tile's rows (row stride `stride`).
template <typename T, typename Out>
void rowwise_dots(T* D, const T* dout, const Out* out, int64_t stride, int64_t rows, int64_t hd) {
  for (int64_t t = 0; t < rows; ++t) {
    const T* dor = dout + t * stride;
    const Out* orow = out + t * stride;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < hd; ++i) dot += dor[i] * T(load(orow + i));
    D[t] = dot;
  }
}

// The forward's probabilities again: p holds the scaled scores of rows
// [r0, r0 + rows) and keys [c0, c0 + cols) (row stride ld) and becomes
// exp(s - lse) where the key is visible, 0 elsewhere.
template <typename T>
void probabilities_from_lse(T* p, int64_t ld, const T* lse, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
                            const int32_t* starts) {
  for (int64_t t = 0; t < rows; ++t) {
    T* row = p + t * ld;
    const VisibleCols vc = visible_cols(starts, r0 + t, c0, cols);
    exp_shift(row + vc.lo, vc.n(), lse[r0 + t]);
    zero_outside(row, vc, cols);
  }
}

// dS = P * (dP - D) * scale, in place over dP (0 where P is masked out).
template <typename T>
void softmax_backward_block(T* dp, const T* p, int64_t ld, const T* D, int64_t rows, int64_t cols, T scale) {
  for (int64_t t = 0; t < rows; ++t) {
    const T* pr = p + t * ld;
    T* dr = dp + t * ld;
    const T d = D[t];
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) dr[j] = pr[j] * (dr[j] - d) * scale;
  }
}

}  // namespace detail

// out and lse written; `scratch` holds omp_get_max_threads() *
// attention_scratch_per_thread(s) elements. The output may be stored as
// bf16 (Out, the input of the next GEMM); it is accumulated in T.
template <typename T, typename Out>
void attention_forward(Out* out, T* lse, T* scratch, const T* q, const T* k, const T* v, const AttnShape& s) {
  const int64_t Tn = s.T, hd = s.d_head, qs = s.q_stride(), ks = s.kv_stride();
  const int64_t Br = s.tile_rows, Bc = s.tile_cols;
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      T* sc = scratch + int64_t(omp_get_thread_num()) * attention_scratch_per_thread(s);
      T* m = sc + Br * Bc;
      T* l = m + Br;
      T* o = l + Br;  // [rows, hd] output accumulator of the tile
      const int64_t g = h / s.group();
      const T* qb = q + b * Tn * qs + h * hd;
      const T* kb = k + b * Tn * ks + g * hd;
      const T* vb = v + b * Tn * ks + g * hd;
      Out* ob = out + b * Tn * qs + h * hd;
      T* lb = lse + (b * s.n_heads + h) * Tn;
      const int32_t* starts = s.doc_start ? s.doc_start + b * Tn : nullptr;
      for (int64_t r0 = 0; r0 < Tn; r0 += Br) {
        const int64_t rows = r0 + Br < Tn ? Br : Tn - r0, r1 = r0 + rows;
        for (int64_t t = 0; t < rows; ++t) {
          m[t] = -INFINITY;
          l[t] = 0;
          for (int64_t i = 0; i < hd; ++i) o[t * hd + i] = 0;
        }
        for (int64_t c0 = detail::first_key_block(starts, r0, rows, Bc); c0 < r1; c0 += Bc) {
          const int64_t cols = c0 + Bc < r1 ? Bc : r1 - c0;
          // S = scale Q[r0:r1] K[c0:c0+cols]^T, then O = O * alpha + P V[c0:c0+cols]
          gemm(false, true, rows, cols, hd, scale, qb + r0 * qs, qs, kb + c0 * ks, ks, T(0), sc, Bc);
          detail::online_softmax_block(sc, Bc, m, l, o, hd, hd, r0, rows, c0, cols, starts);
          gemm(false, false, rows, hd, cols, T(1), sc, Bc, vb + c0 * ks, ks, T(1), o, hd);
        }
        for (int64_t t = 0; t < rows; ++t) {
          const T inv = T(1) / l[t];
          for (int64_t i = 0; i < hd; ++i) store(ob + (r0 + t) * qs + i, o[t * hd + i] * inv);
          lb[r0 + t] = m[t] + std::log(l[t]);
        }
      }
    }
}

// Writes (not accumulates) dq, dk, dv from dout and what forward saved (out,
// lse). Work is split by (batch, kv head), so each thread owns the dk/dv rows
// it accumulates into and the dq rows of its query heads.
template <typename T, typename Out>
void attention_backward(T* dq, T* dk, T* dv, T* scratch, const T* dout, const Out* out, const T* lse, const T* q,
                        const T* k, const T* v, const AttnShape& s) {
  const int64_t Tn = s.T, hd = s.d_head, qs = s.q_stride(), ks = s.kv_stride();
  const int64_t Br = s.tile_rows, Bc = s.tile_cols;
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      T* p = scratch + int64_t(omp_get_thread_num()) * attention_scratch_per_thread(s);
      T* dp = p + Br * Bc;
      T* D = dp + Br * Bc;  // rowsum(dO * O) of the tile
      const T* kb = k + b * Tn * ks + g * hd;
      const T* vb = v + b * Tn * ks + g * hd;
      T* dkb = dk + b * Tn * ks + g * hd;
      T* dvb = dv + b * Tn * ks + g * hd;
      detail::zero_kv_rows(dkb, dvb, Tn, hd, ks);
      for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        const T* qb = q + b * Tn * qs + h * hd;
        const Out* ob = out + b * Tn * qs + h * hd;
        const T* dob = dout + b * Tn * qs + h * hd;
        const T* lb = lse + (b * s.n_heads + h) * Tn;
        T* dqb = dq + b * Tn * qs + h * hd;
        const int32_t* starts = s.doc_start ? s.doc_start + b * Tn : nullptr;
        for (int64_t r0 = 0; r0 < Tn; r0 += Br) {
          const int64_t rows = r0 + Br < Tn ? Br : Tn - r0, r1 = r0 + rows;
          detail::rowwise_dots(D, dob + r0 * qs, ob + r0 * qs, qs, rows, hd);
          const int64_t c_first = detail::first_key_block(starts, r0, rows, Bc);
          for (int64_t c0 = c_first; c0 < r1; c0 += Bc) {
            const int64_t cols = c0 + Bc < r1 ? Bc : r1 - c0;
            // P = exp(scale Q K^T - lse), the forward's probabilities again
            gemm(false, true, rows, cols, hd, scale, qb + r0 * qs, qs, kb + c0 * ks, ks, T(0), p, Bc);
            detail::probabilities_from_lse(p, Bc, lb, r0, rows, c0, cols, starts);
            // dV += P^T dO ; dP = dO V^T
            gemm(true, false, cols, hd, rows, T(1), p, Bc, dob + r0 * qs, qs, T(1), dvb + c0 * ks, ks);
            gemm(false, true, rows, cols, hd, T(1), dob + r0 * qs, qs, vb + c0 * ks, ks, T(0), dp, Bc);
            detail::softmax_backward_block(dp, p, Bc, D, rows, cols, scale);  // dS = P * (dP - D) * scale
            // dQ += dS K (the first key block writes dQ's rows) ; dK += dS^T Q
            gemm(false, false, rows, hd, cols, T(1), dp, Bc, kb + c0 * ks, ks, c0 > c_first ? T(1) : T(0),
                 dqb + r0 * qs, qs);
            gemm(true, false, cols, hd, rows, T(1), dp, Bc, qb + r0 * qs, qs, T(1), dkb + c0 * ks, ks);
          }
        }
      }
    }
}

}  // namespace ggtrain::kernels
