#pragma once
// The gated delta rule (kernels/gated_delta_rule.h: same shapes, inputs,
// outputs and checkpoints) in the chunked "WY" form that training runs
// (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", 2024, section 3.3).
// The recurrent form makes four passes over the d x d state per position
// and head; this one computes a whole segment of positions with a few
// GEMMs. A segment is a chunk of `chunk` positions, cut again where a
// document starts. With S0 the state at a segment's start, G_t = g_0 + ...
// + g_t (the log-decay since it) and D_s the delta of position s:
//   S_t = e^{G_t} S0 + sum_{s<=t} e^{G_t-G_s} k_s D_s^T
//   D   = T R,  R_t = beta_t (v_t - e^{G_t} S0^T k_t)
//   T   = (I + A)^-1,  A_ts = beta_t e^{G_t-G_s} (k_t . k_s) for s < t
//   o_t = scale (e^{G_t} S0^T q_t + sum_{s<=t} e^{G_t-G_s} (q_t . k_s) D_s)
// The end state is S_t at the segment's last position. Every decay factor
// is e to a sum of log-decays (<= 0), so a strong decay underflows to 0 and
// nothing overflows. Backward recomputes a chunk's segments from its
// checkpoint and runs the same products transposed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/gated_delta_rule.h"
#include "kernels/gemm.h"

namespace ggtrain::kernels {

namespace detail {

// One segment's products, kept between its forward and backward. Sized once
// per head task for segments of up to `chunk` positions.
template <typename T>
struct DeltaSegment {
  int64_t L = 0, d = 0;
  std::vector<T> eG;  // [L] e^{G_t}: the decay since the segment's start
  std::vector<T> E;  // [L, L] e^{G_t-G_s} for s <= t, else 0
  // Keys and queries stacked, so that each product with them is one GEMM:
  std::vector<T> KQ;  // [2L, d] k_t rows, then q_t rows
  std::vector<T> Gram;  // [2L, L] k_t . k_s (KK), then q_t . k_s (QK)
  std::vector<T> KQS;  // [2L, d] S0^T k_t (KS), then S0^T q_t (QS)
  std::vector<T> Tinv;  // [L, L] (I + A)^-1, unit lower triangular
  std::vector<T> U, D;  // [L, d] v_t - e^{G_t} S0^T k_t; the deltas
  std::vector<T> Kend;  // [L, d] e^{G_last-G_s} k_s
  std::vector<T> P;  // [L, L] E (.) QK, lower triangle
  DeltaSegment(int64_t chunk, int64_t d_) : d(d_) {
    eG.resize(size_t(chunk));
    for (auto* v : {&E, &Tinv, &P}) v->resize(size_t(chunk * chunk));
    for (auto* v : {&KQ, &KQS}) v->resize(size_t(2 * chunk * d));
    Gram.resize(size_t(2 * chunk * chunk));
    for (auto* v : {&U, &D, &Kend}) v->resize(size_t(chunk * d));
  }
  const T* KK() const { return Gram.data(); }
  const T* QK() const { return Gram.data() + L * L; }
  const T* KS() const { return KQS.data(); }
  const T* QS() const { return KQS.data() + L * d; }
};

// Positions [t0, t0 + L) of row b, head h: pointers to their first q/k
// (stride ldqk), v and o (stride ldv), g and beta (stride H).
template <typename T>
struct SegmentInputs {
  const T *q, *k, *v, *g, *beta;
  int64_t ldqk, ldv, H;
};

// S (d x d) holds S0 and becomes the end state; o (stride in.ldv) is
// written unless null. keep_all: also the products only backward needs.
template <typename T>
void segment_forward(DeltaSegment<T>& w, T* S, T* o, const SegmentInputs<T>& in, int64_t L, T scale, bool keep_all) {
  const int64_t d = w.d;
  w.L = L;
  // Each factor's exponent summed over its own positions (g_{s+1} + ... +
  // g_t), not as G_t - G_s: a difference of two long sums loses the small
  // exponents' bits once the sums are large (strong decays).
  for (int64_t t = 0; t < L; ++t) {
    T* et = w.E.data() + t * L;
    T acc = T(0);
    for (int64_t s = t; s >= 0; --s) {
      et[s] = std::exp(acc);
      acc += in.g[s * in.H];
    }
    w.eG[size_t(t)] = std::exp(acc);
    std::fill(et + t + 1, et + L, T(0));
  }
  // With queries (for o, or for backward) the products take 2L rows, else L.
  const bool queries = o || keep_all;
  const int64_t rows = queries ? 2 * L : L;
  for (int64_t t = 0; t < L; ++t) {
    std::copy(in.k + t * in.ldqk, in.k + t * in.ldqk + d, w.KQ.data() + t * d);
    if (queries) std::copy(in.q + t * in.ldqk, in.q + t * in.ldqk + d, w.KQ.data() + (L + t) * d);
  }
  gemm(false, true, rows, L, d, T(1), w.KQ.data(), d, w.KQ.data(), d, T(0), w.Gram.data(), L);
  gemm(false, false, rows, d, d, T(1), w.KQ.data(), d, S, d, T(0), w.KQS.data(), d);
  for (int64_t t = 0; t < L; ++t) {
    const T bt = in.beta[t * in.H], et = w.eG[size_t(t)];
    const T* vt = in.v + t * in.ldv;
    T* ut = w.U.data() + t * d;
    T* rt = w.Kend.data() + t * d;  // R, needed only for D = T R below
    const T* kst = w.KS() + t * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      ut[j] = vt[j] - et * kst[j];
      rt[j] = bt * ut[j];
    }
  }
  // T = (I + A)^-1 by forward substitution, row by row: T_t = e_t - sum_{s<t} A_ts T_s.
  T* Ti = w.Tinv.data();
  std::fill(Ti, Ti + L * L, T(0));
  for (int64_t t = 0; t < L; ++t) {
    const T bt = in.beta[t * in.H];
    T* row = Ti + t * L;
    for (int64_t s = 0; s < t; ++s) {
      const T a = bt * w.E[size_t(t * L + s)] * w.KK()[t * L + s];
      const T* rs = Ti + s * L;
#pragma omp simd
      for (int64_t c = 0; c <= s; ++c) row[c] -= a * rs[c];
    }
    row[t] = T(1);
  }
  gemm(false, false, L, d, L, T(1), Ti, L, w.Kend.data(), d, T(0), w.D.data(), d);
  if (queries)
    for (int64_t x = 0; x < L * L; ++x) w.P[size_t(x)] = w.E[size_t(x)] * w.QK()[x];
  if (o) {
    for (int64_t t = 0; t < L; ++t) {
      const T f = scale * w.eG[size_t(t)];
      const T* qs = w.QS() + t * d;
      T* ot = o + t * in.ldv;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) ot[j] = f * qs[j];
    }
    gemm(false, false, L, d, L, scale, w.P.data(), L, w.D.data(), d, T(1), o, in.ldv);
  }
  const T* e_end = w.E.data() + (L - 1) * L;  // e^{G_last-G_s}
  for (int64_t s = 0; s < L; ++s) {
    const T* ks = in.k + s * in.ldqk;
    T* ke = w.Kend.data() + s * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) ke[i] = e_end[s] * ks[i];
  }
  const T e_last = w.eG[size_t(L - 1)];
  for (int64_t x = 0; x < d * d; ++x) S[x] *= e_last;
  gemm(true, false, d, d, L, T(1), w.Kend.data(), d, w.D.data(), d, T(1), S, d);
}

// Buffers of one segment's backward, sized once per head task.
template <typename T>
struct DeltaSegmentGrads {
  std::vector<T> gO, dD, dKend, dR;  // [L, d]
  std::vector<T> dKQS, dKQ;  // [2L, d] stacked like DeltaSegment::KQ
  std::vector<T> dP, dA;  // [L, L]
  std::vector<T> W;  // [2L, L] the weights on k_t . k_s (symmetric), then on q_t . k_s
  std::vector<T> dG;  // [L]
  DeltaSegmentGrads(int64_t chunk, int64_t d) {
    for (auto* v : {&gO, &dD, &dKend, &dR}) v->resize(size_t(chunk * d));
    for (auto* v : {&dKQS, &dKQ}) v->resize(size_t(2 * chunk * d));
    for (auto* v : {&dP, &dA}) v->resize(size_t(chunk * chunk));
    W.resize(size_t(2 * chunk * chunk));
    dG.resize(size_t(chunk));
  }
};

template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T acc = T(0);
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// The segment whose products segment_forward(keep_all) left in w, started
// from S0. dS: in, the gradient of its end state; out, of S0 (0 when the
// segment starts a document: S0 is then a constant). Writes the segment's
// rows of dq, dk (per value head, stride ldqk_h), dv, dg and dbeta.
template <typename T>
void segment_backward(const DeltaSegment<T>& w, DeltaSegmentGrads<T>& x, T* dS, const T* S0, bool starts_document,
                      const T* d_o, T* dq, T* dk, T* dv, T* dg, T* dbeta, int64_t ldqk_h, const SegmentInputs<T>& in,
                      T scale) {
  const int64_t L = w.L, d = w.d;
  for (int64_t t = 0; t < L; ++t) {
    T* got = x.gO.data() + t * d;
    const T* dot_ = d_o + t * in.ldv;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) got[j] = scale * dot_[j];
  }
  // o = e^G QS + P D (times scale, now in gO); S_end = e^{G_last} S0 + Kend^T D
  gemm(true, false, L, d, L, T(1), w.P.data(), L, x.gO.data(), d, T(0), x.dD.data(), d);
  gemm(false, false, L, d, d, T(1), w.Kend.data(), d, dS, d, T(1), x.dD.data(), d);
  gemm(false, true, L, d, d, T(1), w.D.data(), d, dS, d, T(0), x.dKend.data(), d);
  gemm(false, true, L, L, d, T(1), x.gO.data(), d, w.D.data(), d, T(0), x.dP.data(), L);
  // D = T R; (I + A) D = R gives dA = -dR D^T
  gemm(true, false, L, d, L, T(1), w.Tinv.data(), L, x.dD.data(), d, T(0), x.dR.data(), d);
  gemm(false, true, L, L, d, T(-1), x.dR.data(), d, w.D.data(), d, T(0), x.dA.data(), L);
  T* dG = x.dG.data();
  const T e_last = w.eG[size_t(L - 1)];
  for (int64_t t = 0; t < L; ++t) {
    const T et = w.eG[size_t(t)], bt = in.beta[t * in.H];
    const T* got = x.gO.data() + t * d;
    const T* drt = x.dR.data() + t * d;
    T* dks = x.dKQS.data() + t * d;
    T* dqs = x.dKQS.data() + (L + t) * d;
    T* dvt = dv + t * in.ldv;
    dG[t] = et * (dot(got, w.QS() + t * d, d) - bt * dot(drt, w.KS() + t * d, d));
    dbeta[t * in.H] = dot(drt, w.U.data() + t * d, d);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      dqs[j] = et * got[j];
      dks[j] = -bt * et * drt[j];
      dvt[j] = bt * drt[j];
    }
  }
  dG[L - 1] += e_last * dot(S0, dS, d * d);
  // A_ts = beta_t E_ts KK_ts (s < t), P_ts = E_ts QK_ts (s <= t): their
  // weights on k_t . k_s and q_t . k_s, and on E (dE (.) E, by rows and columns).
  T* WK = x.W.data();
  T* WQ = x.W.data() + L * L;
  for (int64_t t = 0; t < L; ++t) {
    const T bt = in.beta[t * in.H];
    T db = T(0);
    for (int64_t s = 0; s < L; ++s) {
      const int64_t ts = t * L + s;
      T wk = T(0), wq = T(0);
      if (s <= t) {
        const T e = w.E[size_t(ts)];
        T de = x.dP[size_t(ts)] * w.QK()[ts];
        wq = x.dP[size_t(ts)] * e;
        if (s < t) {
          db += x.dA[size_t(ts)] * e * w.KK()[ts];
          wk = x.dA[size_t(ts)] * bt * e;
          de += x.dA[size_t(ts)] * bt * w.KK()[ts];
        }
        de *= e;
        dG[t] += de;
        dG[s] -= de;
      }
      WK[ts] = wk;
      WQ[ts] = wq;
    }
    dbeta[t * in.H] += db;
  }
  // k_t . k_s counts for both keys: weigh them with WK + WK^T (WK is strictly lower).
  for (int64_t t = 0; t < L; ++t)
    for (int64_t s = t + 1; s < L; ++s) WK[t * L + s] = WK[s * L + t];
  // Kend_s = e^{G_last-G_s} k_s
  const T* e_end = w.E.data() + (L - 1) * L;
  for (int64_t s = 0; s < L; ++s) {
    const T wsum = e_end[s] * dot(in.k + s * in.ldqk, x.dKend.data() + s * d, d);
    dG[L - 1] += wsum;
    dG[s] -= wsum;
  }
  // [dk; dq] = [WK + WK^T; WQ] K + [dKS; dQS] S0^T, then dk += WQ^T Q + e^{G_last-G} dKend
  const T* K = w.KQ.data();
  const T* Q = w.KQ.data() + L * d;
  gemm(false, false, 2 * L, d, L, T(1), x.W.data(), L, K, d, T(0), x.dKQ.data(), d);
  gemm(false, true, 2 * L, d, d, T(1), x.dKQS.data(), d, S0, d, T(1), x.dKQ.data(), d);
  gemm(true, false, L, d, L, T(1), WQ, L, Q, d, T(1), x.dKQ.data(), d);
  for (int64_t s = 0; s < L; ++s) {
    const T* dke = x.dKend.data() + s * d;
    const T* dkq = x.dKQ.data() + s * d;
    const T* dqq = x.dKQ.data() + (L + s) * d;
    T* dks = dk + s * ldqk_h;
    T* dqs = dq + s * ldqk_h;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) {
      dks[i] = dkq[i] + e_end[s] * dke[i];
      dqs[i] = dqq[i];
    }
  }
  // dg_s = sum_{t >= s} dG_t; a document's first decay multiplies S0 = 0 only.
  T run = T(0);
  for (int64_t s = L - 1; s >= 0; --s) {
    run += dG[s];
    dg[s * in.H] = run;
  }
  if (starts_document) {
    dg[0] = T(0);
    std::fill(dS, dS + d * d, T(0));
    return;
  }
  // dS0 = e^{G_last} dS + [K; Q]^T [dKS; dQS]
  for (int64_t i = 0; i < d * d; ++i) dS[i] *= e_last;
  gemm(true, false, d, d, 2 * L, T(1), w.KQ.data(), d, x.dKQS.data(), d, T(1), dS, d);
}

// The segments of chunk c of row b: [start, end) pairs, cut at document starts.
inline void chunk_segments(const DeltaRuleShape& s, int64_t b, int64_t c, std::vector<int64_t>& cuts) {
  const int64_t c0 = c * s.chunk, c1 = std::min(s.seq, c0 + s.chunk);
  cuts.clear();
  cuts.push_back(c0);
  for (int64_t t = c0 + 1; t < c1; ++t)
    if (starts_document(s, b, t)) cuts.push_back(t);
  cuts.push_back(c1);
}

template <typename T>
SegmentInputs<T> segment_inputs(const T* q, const T* k, const T* v, const T* g, const T* beta, const DeltaRuleShape& s,
                                int64_t b, int64_t h, int64_t t0) {
  const int64_t H = s.n_v_heads, HK = s.n_k_heads, d = s.d, r = b * s.seq + t0, hk = h % HK;
  return {q + (r * HK + hk) * d,
          k + (r * HK + hk) * d,
          v + (r * H + h) * d,
          g + r * H + h,
          beta + r * H + h,
          HK * d,
          H * d,
          H};
}

}  // namespace detail

// Same contract as delta_rule_forward. state [batch, n_v_heads, d, d], when
// given, is each row's state before its first position (else 0), advanced
// in place to the state after its last: how the decoder runs a prompt.
template <typename T>
void delta_rule_chunked_forward(T* o, T* checkpoints, const T* q, const T* k, const T* v, const T* g, const T* beta,
                                const DeltaRuleShape& s, T* state = nullptr) {
  const int64_t H = s.n_v_heads, d = s.d;
  const T scale = T(1) / std::sqrt(T(d));
  // A given state carries into position 0; later document starts reset it.
  auto resets = [&](int64_t b, int64_t t) { return (t > 0 || !state) && detail::starts_document(s, b, t); };
  // Always a parallel region, even for one task: the float GEMMs inside then
  // run on one thread each, so no thread count changes a sum's order.
#pragma omp parallel
  {
    detail::DeltaSegment<T> w(s.chunk, d);
    std::vector<T> S(size_t(d * d));
    std::vector<int64_t> cuts;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.batch * H; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      if (state) std::copy(state + bh * d * d, state + (bh + 1) * d * d, S.begin());
      else std::fill(S.begin(), S.end(), T(0));
      for (int64_t c = 0; c < s.n_chunks(); ++c) {
        // As the recurrent form keeps them: after a reset at the chunk's start.
        if (resets(b, c * s.chunk)) std::fill(S.begin(), S.end(), T(0));
        if (checkpoints) std::copy(S.begin(), S.end(), checkpoints + ((b * H + h) * s.n_chunks() + c) * d * d);
        detail::chunk_segments(s, b, c, cuts);
        for (size_t i = 0; i + 1 < cuts.size(); ++i) {
          const int64_t t0 = cuts[i];
          if (resets(b, t0)) std::fill(S.begin(), S.end(), T(0));
          const auto in = detail::segment_inputs(q, k, v, g, beta, s, b, h, t0);
          detail::segment_forward(w, S.data(), o + ((b * s.seq + t0) * H + h) * d, in, cuts[i + 1] - t0, scale, false);
        }
      }
      if (state) std::copy(S.begin(), S.end(), state + bh * d * d);
    }
  }
}

// Same contract as delta_rule_backward (scratch: delta_rule_backward_scratch).
template <typename T>
void delta_rule_chunked_backward(T* dq, T* dk, T* dv, T* dg, T* dbeta, T* scratch, const T* d_o, const T* checkpoints,
                                 const T* q, const T* k, const T* v, const T* g, const T* beta,
                                 const DeltaRuleShape& s) {
  const int64_t H = s.n_v_heads, d = s.d;
  const T scale = T(1) / std::sqrt(T(d));
  T* dq_h = scratch;  // [batch*seq, H, d]
  T* dk_h = scratch + s.batch * s.seq * H * d;
#pragma omp parallel
  {
    detail::DeltaSegment<T> w(s.chunk, d);
    detail::DeltaSegmentGrads<T> x(s.chunk, d);
    std::vector<T> dS(size_t(d * d)), starts, S(size_t(d * d));
    std::vector<int64_t> cuts;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.batch * H; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      std::fill(dS.begin(), dS.end(), T(0));
      for (int64_t c = s.n_chunks() - 1; c >= 0; --c) {
        detail::chunk_segments(s, b, c, cuts);
        const size_t n_seg = cuts.size() - 1;
        // Each segment's starting state, from the chunk's checkpoint: segment
        // i's forward turns a copy of its start into segment i + 1's.
        starts.resize(n_seg * size_t(d * d));
        const T* cp = checkpoints + ((b * H + h) * s.n_chunks() + c) * d * d;
        std::copy(cp, cp + d * d, starts.begin());
        for (size_t i = 0; i < n_seg; ++i) {
          T* Si = starts.data() + i * size_t(d * d);
          if (detail::starts_document(s, b, cuts[i])) std::fill(Si, Si + d * d, T(0));
          if (i + 1 < n_seg) {
            std::copy(Si, Si + d * d, Si + d * d);
            const auto in = detail::segment_inputs(q, k, v, g, beta, s, b, h, cuts[i]);
            detail::segment_forward(w, Si + d * d, static_cast<T*>(nullptr), in, cuts[i + 1] - cuts[i], scale, false);
          }
        }
        for (size_t i = n_seg; i-- > 0;) {
          const int64_t t0 = cuts[i], r0 = b * s.seq + t0;
          const T* S0 = starts.data() + i * size_t(d * d);
          std::copy(S0, S0 + d * d, S.begin());
          const auto in = detail::segment_inputs(q, k, v, g, beta, s, b, h, t0);
          detail::segment_forward(w, S.data(), static_cast<T*>(nullptr), in, cuts[i + 1] - t0, scale, true);
          detail::segment_backward(w, x, dS.data(), S0, detail::starts_document(s, b, t0), d_o + (r0 * H + h) * d,
                                   dq_h + (r0 * H + h) * d, dk_h + (r0 * H + h) * d, dv + (r0 * H + h) * d,
                                   dg + r0 * H + h, dbeta + r0 * H + h, H * d, in, scale);
        }
      }
    }
  }
  detail::sum_value_heads_into_key_heads(dq, dk, dq_h, dk_h, s);
}

}  // namespace ggtrain::kernels
