#pragma once
// Flash attention of bf16 training: the same algorithm as attention.h (query
// tiles over key blocks, online softmax, log-sum-exp kept, scores recomputed
// in backward), with every product of the tiles on bf16 operands through
// tile_gemm_bf16 (float accumulation); scores, softmax, the output
// accumulator, D = rowsum(dO * O) and the gradients stay float. q, k, v and
// dout come in float; each (batch, head) packs K and V into the layouts the
// kernel reads, each tile packs its rows of Q, dO, P and dS.
// The (batch, head) and tile loops repeat attention.h's on purpose: they are
// the algorithm, written out as llm.c writes its kernels; what differs is
// the packing between them. The non-GEMM steps both share live in
// attention.h's detail.
#include <omp.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/tile_gemm_bf16.h"

namespace ggtrain::kernels {

namespace detail {

struct Bf16AttnDims {
  int64_t Br, Bc, hd2, T2, Br2;  // Bc rounded up to even: key blocks start at even keys
  explicit Bf16AttnDims(const AttnShape& s)
      : Br(s.tile_rows),
        Bc(s.tile_cols + s.tile_cols % 2),
        hd2(s.d_head / 2),
        T2((s.T + 1) / 2),
        Br2((s.tile_rows + 1) / 2) {}
  int64_t forward_floats(const AttnShape& s) const {
    return Br * Bc + 2 * Br + Br * s.d_head + Br * hd2 + Br * Bc / 2 + hd2 * s.T + T2 * s.d_head;
  }
  int64_t backward_floats(const AttnShape& s) const {
    return 2 * Br * Bc + Br + 2 * Br * hd2 + 2 * Br2 * s.d_head + 2 * Br2 * Bc + Br * Bc / 2 + 2 * hd2 * s.T +
           T2 * s.d_head;
  }
};

// Carves consecutive regions of a thread's scratch (in 4-byte units).
struct Carve {
  float* p;
  float* f(int64_t n) {
    float* r = p;
    p += n;
    return r;
  }
  uint32_t* u(int64_t n) { return reinterpret_cast<uint32_t*>(f(n)); }
};

}  // namespace detail

// Scratch floats the bf16 kernels need per thread (d_head must be even).
inline int64_t attention_bf16_scratch_per_thread(const AttnShape& s) {
  const detail::Bf16AttnDims d(s);
  const int64_t f = d.forward_floats(s), b = d.backward_floats(s);
  return f > b ? f : b;
}

template <typename Out>
void attention_forward_bf16(Out* out, float* lse, float* scratch, const float* q, const float* k, const float* v,
                            const AttnShape& s) {
  const int64_t Tn = s.T, hd = s.d_head, qs = s.q_stride(), ks = s.kv_stride();
  const detail::Bf16AttnDims d(s);
  const int64_t Br = d.Br, Bc = d.Bc, hd2 = d.hd2;
  const float scale = 1.f / std::sqrt(float(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      detail::Carve c{scratch + int64_t(omp_get_thread_num()) * attention_bf16_scratch_per_thread(s)};
      float* S = c.f(Br * Bc);
      float* m = c.f(Br);
      float* l = c.f(Br);
      float* o = c.f(Br * hd);
      uint32_t* Qh = c.u(Br * hd2);  // rows of Q, bf16
      uint32_t* Ph = c.u(Br * Bc / 2);  // rows of P, bf16, even length
      uint32_t* Kd = c.u(hd2 * Tn);  // K^T in pairs along d
      uint32_t* Vj = c.u(d.T2 * hd);  // V in pairs along keys
      const int64_t g = h / s.group();
      const float* qb = q + b * Tn * qs + h * hd;
      const float* kb = k + b * Tn * ks + g * hd;
      const float* vb = v + b * Tn * ks + g * hd;
      Out* ob = out + b * Tn * qs + h * hd;
      float* lb = lse + (b * s.n_heads + h) * Tn;
      pack_col_pairs(Kd, Tn, kb, ks, hd, Tn);
      pack_row_pairs(Vj, hd, vb, ks, Tn, hd);
      const int32_t* starts = s.doc_start ? s.doc_start + b * Tn : nullptr;
      for (int64_t r0 = 0; r0 < Tn; r0 += Br) {
        const int64_t rows = r0 + Br < Tn ? Br : Tn - r0, r1 = r0 + rows;
        pack_rows(reinterpret_cast<bf16*>(Qh), hd, qb + r0 * qs, qs, rows, hd);
        for (int64_t t = 0; t < rows; ++t) {
          m[t] = -INFINITY;
          l[t] = 0;
          for (int64_t i = 0; i < hd; ++i) o[t * hd + i] = 0;
        }
        // (Bc is even, so every block starts at an even key, as Vj's pairs need)
        for (int64_t c0 = detail::first_key_block(starts, r0, rows, Bc); c0 < r1; c0 += Bc) {
          const int64_t cols = c0 + Bc < r1 ? Bc : r1 - c0;
          tile_gemm_bf16(rows, cols, hd2, scale, Qh, hd2, 1, Kd + c0, Tn, false, S, Bc);
          detail::online_softmax_block(S, Bc, m, l, o, hd, hd, r0, rows, c0, cols, starts);
          pack_rows(reinterpret_cast<bf16*>(Ph), Bc, S, Bc, rows, cols);
          tile_gemm_bf16(rows, hd, (cols + 1) / 2, 1.f, Ph, Bc / 2, 1, Vj + (c0 / 2) * hd, hd, true, o, hd);
        }
        for (int64_t t = 0; t < rows; ++t) {
          const float inv = 1.f / l[t];
          for (int64_t i = 0; i < hd; ++i) store(ob + (r0 + t) * qs + i, o[t * hd + i] * inv);
          lb[r0 + t] = m[t] + std::log(l[t]);
        }
      }
    }
}

template <typename Out>
void attention_backward_bf16(float* dq, float* dk, float* dv, float* scratch, const float* dout, const Out* out,
                             const float* lse, const float* q, const float* k, const float* v, const AttnShape& s) {
  const int64_t Tn = s.T, hd = s.d_head, qs = s.q_stride(), ks = s.kv_stride();
  const detail::Bf16AttnDims d(s);
  const int64_t Br = d.Br, Bc = d.Bc, hd2 = d.hd2;
  const float scale = 1.f / std::sqrt(float(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      detail::Carve c{scratch + int64_t(omp_get_thread_num()) * attention_bf16_scratch_per_thread(s)};
      float* P = c.f(Br * Bc);
      float* dP = c.f(Br * Bc);
      float* D = c.f(Br);
      uint32_t* Qh = c.u(Br * hd2);  // rows of Q and dO, bf16
      uint32_t* dOh = c.u(Br * hd2);
      uint32_t* Qi = c.u(d.Br2 * hd);  // Q and dO in pairs along rows
      uint32_t* dOi = c.u(d.Br2 * hd);
      uint32_t* Pp = c.u(d.Br2 * Bc);  // P and dS in pairs along rows (P^T, dS^T as A)
      uint32_t* dSp = c.u(d.Br2 * Bc);
      uint32_t* dSh = c.u(Br * Bc / 2);  // rows of dS, bf16
      uint32_t* Kd = c.u(hd2 * Tn);  // K^T, V^T in pairs along d
      uint32_t* Vd = c.u(hd2 * Tn);
      uint32_t* Kj = c.u(d.T2 * hd);  // K in pairs along keys
      const float* kb = k + b * Tn * ks + g * hd;
      const float* vb = v + b * Tn * ks + g * hd;
      float* dkb = dk + b * Tn * ks + g * hd;
      float* dvb = dv + b * Tn * ks + g * hd;
      pack_col_pairs(Kd, Tn, kb, ks, hd, Tn);
      pack_col_pairs(Vd, Tn, vb, ks, hd, Tn);
      pack_row_pairs(Kj, hd, kb, ks, Tn, hd);
      detail::zero_kv_rows(dkb, dvb, Tn, hd, ks);
      for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        const float* qb = q + b * Tn * qs + h * hd;
        const Out* ob = out + b * Tn * qs + h * hd;
        const float* dob = dout + b * Tn * qs + h * hd;
        const float* lb = lse + (b * s.n_heads + h) * Tn;
        float* dqb = dq + b * Tn * qs + h * hd;
        const int32_t* starts = s.doc_start ? s.doc_start + b * Tn : nullptr;
        for (int64_t r0 = 0; r0 < Tn; r0 += Br) {
          const int64_t rows = r0 + Br < Tn ? Br : Tn - r0, r1 = r0 + rows, rows2 = (rows + 1) / 2;
          detail::rowwise_dots(D, dob + r0 * qs, ob + r0 * qs, qs, rows, hd);
          pack_rows(reinterpret_cast<bf16*>(Qh), hd, qb + r0 * qs, qs, rows, hd);
          pack_rows(reinterpret_cast<bf16*>(dOh), hd, dob + r0 * qs, qs, rows, hd);
          pack_row_pairs(Qi, hd, qb + r0 * qs, qs, rows, hd);
          pack_row_pairs(dOi, hd, dob + r0 * qs, qs, rows, hd);
          const int64_t c_first = detail::first_key_block(starts, r0, rows, Bc);
          for (int64_t c0 = c_first; c0 < r1; c0 += Bc) {
            const int64_t cols = c0 + Bc < r1 ? Bc : r1 - c0, cols2 = (cols + 1) / 2;
            // P = exp(scale Q K^T - lse), as forward computed it
            tile_gemm_bf16(rows, cols, hd2, scale, Qh, hd2, 1, Kd + c0, Tn, false, P, Bc);
            detail::probabilities_from_lse(P, Bc, lb, r0, rows, c0, cols, starts);
            // dV += P^T dO ; dP = dO V^T
            pack_row_pairs(Pp, Bc, P, Bc, rows, cols);
            tile_gemm_bf16(cols, hd, rows2, 1.f, Pp, 1, Bc, dOi, hd, true, dvb + c0 * ks, ks);
            tile_gemm_bf16(rows, cols, hd2, 1.f, dOh, hd2, 1, Vd + c0, Tn, false, dP, Bc);
            detail::softmax_backward_block(dP, P, Bc, D, rows, cols, scale);  // dS = P * (dP - D) * scale
            // dQ += dS K ; dK += dS^T Q
            pack_rows(reinterpret_cast<bf16*>(dSh), Bc, dP, Bc, rows, cols);
            // (the first key block writes dQ's rows, the others add)
            tile_gemm_bf16(rows, hd, cols2, 1.f, dSh, Bc / 2, 1, Kj + (c0 / 2) * hd, hd, c0 > c_first, dqb + r0 * qs,
                           qs);
            pack_row_pairs(dSp, Bc, dP, Bc, rows, cols);
            tile_gemm_bf16(cols, hd, rows2, 1.f, dSp, 1, Bc, Qi, hd, true, dkb + c0 * ks, ks);
          }
        }
      }
    }
}

}  // namespace ggtrain::kernels
