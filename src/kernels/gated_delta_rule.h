#pragma once
// The gated delta rule of Gated DeltaNet (Qwen3.5's linear-attention
// layers), as llama.cpp's ggml_gated_delta_net computes it, with its
// backward for training. Per value head h, a state S [d, d] (row i: key
// dimension, column j: value dimension) runs over the positions:
//   S   = exp(g[t]) S                        decay (g: log-decay, <= 0)
//   m_j = sum_i S_ij k_i                     what S recalls for k
//   D_j = beta[t] (v_j - m_j)                the delta
//   S_ij += k_i D_j                          the update
//   o_j = scale * sum_i S_ij q_i             scale = 1 / sqrt(d)
// q and k have n_k_heads; value head h reads key head h % n_k_heads (ggml
// tiles the key heads, it does not group them). A position that starts a
// document starts from S = 0, as llama.cpp starts a sequence.
//
// Training keeps S only at the start of every chunk of `chunk` positions
// (memory linear in the window, not in window x d x d); backward recomputes
// a chunk's states from its checkpoint and runs back through it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/parallel.h"

namespace ggtrain::kernels {

struct DeltaRuleShape {
  int64_t batch = 1, seq = 0;
  int64_t n_v_heads = 0, n_k_heads = 0;
  int64_t d = 0;  // key and value head size (equal, as llama.cpp requires)
  int64_t chunk = 64;  // positions between state checkpoints
  const int32_t* doc_start = nullptr;  // [batch, seq] first position of each position's document; null: none
  int64_t n_chunks() const { return (seq + chunk - 1) / chunk; }
  // Floats of the checkpoints: [batch, n_v_heads, n_chunks, d, d].
  int64_t checkpoint_floats() const { return batch * n_v_heads * n_chunks() * d * d; }
};

namespace detail {

// One position of one head: S (d x d, row-major [i][j]) advanced in place;
// writes o (d) unless null, and `recalled` (m, d) unless null. Two passes
// over S: decay and recall, then update and read-out. Each sum is one
// multiply and one add, so a compiler that fuses them into an FMA has one
// way to do it: the forward, the backward's recomputation and the decoder
// get the same bits.
template <typename T>
void delta_rule_step(T* S, T* o, T* recalled, const T* q, const T* k, const T* v, T g, T beta, T scale, int64_t d,
                     T* delta) {
  const T a = std::exp(g);
  for (int64_t j = 0; j < d; ++j) delta[j] = T(0);
  for (int64_t i = 0; i < d; ++i) {
    const T ki = k[i];
    T* Si = S + i * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      Si[j] *= a;
      delta[j] += Si[j] * ki;
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    if (recalled) recalled[j] = delta[j];
    delta[j] = (v[j] - delta[j]) * beta;
  }
  if (!o) {
    for (int64_t i = 0; i < d; ++i) {
      const T ki = k[i];
      T* Si = S + i * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) Si[j] += ki * delta[j];
    }
    return;
  }
  for (int64_t j = 0; j < d; ++j) o[j] = T(0);
  for (int64_t i = 0; i < d; ++i) {
    const T ki = k[i], qi = q[i];
    T* Si = S + i * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      Si[j] += ki * delta[j];
      o[j] += Si[j] * qi;
    }
  }
  for (int64_t j = 0; j < d; ++j) o[j] *= scale;
}

inline bool starts_document(const DeltaRuleShape& s, int64_t b, int64_t t) {
  return t == 0 || (s.doc_start && s.doc_start[b * s.seq + t] == t);
}

// dq, dk (key-head layout) from the per-value-head dq_h, dk_h: the value
// heads h with h % n_k_heads == hk add up, in h order.
template <typename T>
void sum_value_heads_into_key_heads(T* dq, T* dk, const T* dq_h, const T* dk_h, const DeltaRuleShape& s) {
  const int64_t H = s.n_v_heads, HK = s.n_k_heads, d = s.d;
  std::fill(dq, dq + s.batch * s.seq * HK * d, T(0));
  std::fill(dk, dk + s.batch * s.seq * HK * d, T(0));
#pragma omp parallel for schedule(static) if (s.batch * s.seq * H * d >= kMinParallelWork)
  for (int64_t r = 0; r < s.batch * s.seq; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < d; ++i) {
        dq[(r * HK + h % HK) * d + i] += dq_h[(r * H + h) * d + i];
        dk[(r * HK + h % HK) * d + i] += dk_h[(r * H + h) * d + i];
      }
}

}  // namespace detail

// o [batch*seq, n_v_heads, d] from q, k [batch*seq, n_k_heads, d], v [.., n_v_heads, d],
// g, beta [batch*seq, n_v_heads]; checkpoints (may be null when no backward
// follows): each chunk's starting state.
template <typename T>
void delta_rule_forward(T* o, T* checkpoints, const T* q, const T* k, const T* v, const T* g, const T* beta,
                        const DeltaRuleShape& s) {
  const int64_t H = s.n_v_heads, HK = s.n_k_heads, d = s.d;
  const T scale = T(1) / std::sqrt(T(d));
#pragma omp parallel for schedule(static) if (s.batch * H * s.seq * d * d >= kMinParallelWork)
  for (int64_t bh = 0; bh < s.batch * H; ++bh) {
    const int64_t b = bh / H, h = bh % H, hk = h % HK;
    std::vector<T> S(size_t(d * d), T(0)), delta(static_cast<size_t>(d));
    for (int64_t t = 0; t < s.seq; ++t) {
      if (detail::starts_document(s, b, t)) std::fill(S.begin(), S.end(), T(0));
      if (checkpoints && t % s.chunk == 0)
        std::copy(S.begin(), S.end(), checkpoints + ((b * H + h) * s.n_chunks() + t / s.chunk) * d * d);
      const int64_t r = b * s.seq + t;
      detail::delta_rule_step(S.data(), o + (r * H + h) * d, static_cast<T*>(nullptr), q + (r * HK + hk) * d,
                              k + (r * HK + hk) * d, v + (r * H + h) * d, g[r * H + h], beta[r * H + h], scale, d,
                              delta.data());
    }
  }
}

// From d_o (same layout as o): dq, dk (written, key-head layout: the value
// heads that share a key head add up, in head order), dv, dg, dbeta
// (written). scratch: delta_rule_backward_scratch(s) floats.
inline int64_t delta_rule_backward_scratch(const DeltaRuleShape& s) {
  return 2 * s.batch * s.seq * s.n_v_heads * s.d;  // dq and dk per value head
}
template <typename T>
void delta_rule_backward(T* dq, T* dk, T* dv, T* dg, T* dbeta, T* scratch, const T* d_o, const T* checkpoints,
                         const T* q, const T* k, const T* v, const T* g, const T* beta, const DeltaRuleShape& s) {
  const int64_t H = s.n_v_heads, HK = s.n_k_heads, d = s.d, C = s.chunk;
  const T scale = T(1) / std::sqrt(T(d));
  T* dq_h = scratch;  // [batch*seq, H, d]
  T* dk_h = scratch + s.batch * s.seq * H * d;
#pragma omp parallel for schedule(static) if (s.batch * H * s.seq * d * d >= kMinParallelWork)
  for (int64_t bh = 0; bh < s.batch * H; ++bh) {
    const int64_t b = bh / H, h = bh % H, hk = h % HK;
    // states[u]: S after position c0 + u - 1 (states[0]: the chunk's start, before its first reset)
    std::vector<T> states(size_t((C + 1) * d * d)), recalled(size_t(C * d)), dS(size_t(d * d), T(0)),
        dS_prev(size_t(d * d)), delta(static_cast<size_t>(d)), ddelta(static_cast<size_t>(d)),
        dm(static_cast<size_t>(d));
    for (int64_t c = s.n_chunks() - 1; c >= 0; --c) {
      const int64_t c0 = c * C, c1 = std::min(s.seq, c0 + C);
      const T* cp = checkpoints + ((b * H + h) * s.n_chunks() + c) * d * d;
      std::copy(cp, cp + d * d, states.begin());
      for (int64_t t = c0; t < c1; ++t) {  // recompute the chunk's states
        T* S = states.data() + (t - c0 + 1) * d * d;
        const T* prev = states.data() + (t - c0) * d * d;
        if (detail::starts_document(s, b, t)) std::fill(S, S + d * d, T(0));
        else std::copy(prev, prev + d * d, S);
        const int64_t r = b * s.seq + t;
        detail::delta_rule_step(S, static_cast<T*>(nullptr), recalled.data() + (t - c0) * d, q + (r * HK + hk) * d,
                                k + (r * HK + hk) * d, v + (r * H + h) * d, g[r * H + h], beta[r * H + h], scale, d,
                                delta.data());
      }
      for (int64_t t = c1 - 1; t >= c0; --t) {
        const int64_t r = b * s.seq + t;
        const T *qt = q + (r * HK + hk) * d, *kt = k + (r * HK + hk) * d, *vt = v + (r * H + h) * d;
        const T *dot = d_o + (r * H + h) * d, *m = recalled.data() + (t - c0) * d;
        const T* St = states.data() + (t - c0 + 1) * d * d;
        const bool reset = detail::starts_document(s, b, t);
        const T* Sprev = states.data() + (t - c0) * d * d;  // S_{t-1}; zero at a reset
        const T a = std::exp(g[r * H + h]), bt = beta[r * H + h];
        T* dqt = dq_h + (r * H + h) * d;
        T* dkt = dk_h + (r * H + h) * d;
        // o = scale S_t^T q
        // The sums over j below run in SIMD lanes (omp simd reduction):
        // a fixed order, whatever the thread count.
        for (int64_t i = 0; i < d; ++i) {
          T acc = T(0);
          T* dSi = dS.data() + i * d;
          const T* Sti = St + i * d;
#pragma omp simd reduction(+ : acc)
          for (int64_t j = 0; j < d; ++j) {
            dSi[j] += scale * qt[i] * dot[j];
            acc += Sti[j] * dot[j];
          }
          dqt[i] = scale * acc;
        }
        // S_t = S' + k D^T
        for (int64_t j = 0; j < d; ++j) delta[size_t(j)] = (vt[j] - m[j]) * bt, ddelta[size_t(j)] = T(0);
        for (int64_t i = 0; i < d; ++i) {
          T acc = T(0);
          const T* dSi = dS.data() + i * d;
          T* ddl = ddelta.data();
          const T* dl = delta.data();
#pragma omp simd reduction(+ : acc)
          for (int64_t j = 0; j < d; ++j) {
            ddl[j] += dSi[j] * kt[i];
            acc += dSi[j] * dl[j];
          }
          dkt[i] = acc;
        }
        // D = beta (v - m), m = S'^T k, S' = a S_{t-1}
        T db = T(0);
        for (int64_t j = 0; j < d; ++j) {
          dv[(r * H + h) * d + j] = bt * ddelta[size_t(j)];
          db += ddelta[size_t(j)] * (vt[j] - m[j]);
          dm[size_t(j)] = -bt * ddelta[size_t(j)];
        }
        dbeta[r * H + h] = db;
        T da = T(0);
        const T* dmv = dm.data();
        for (int64_t i = 0; i < d; ++i) {
          T* dSp = dS_prev.data() + i * d;
          const T* dSi = dS.data() + i * d;
          if (reset) {  // S' = 0: no gradient reaches S_{t-1}, k's recall term is 0
            std::fill(dSp, dSp + d, T(0));
            continue;
          }
          const T* Sp = Sprev + i * d;
          T acc = T(0);
#pragma omp simd reduction(+ : acc, da)
          for (int64_t j = 0; j < d; ++j) {
            acc += a * Sp[j] * dmv[j];  // S' = a S_{t-1}
            const T dsp = dSi[j] + kt[i] * dmv[j];  // dS'
            da += dsp * Sp[j];
            dSp[j] = a * dsp;
          }
          dkt[i] += acc;
        }
        dg[r * H + h] = da * a;
        dS.swap(dS_prev);
      }
    }
  }
  detail::sum_value_heads_into_key_heads(dq, dk, dq_h, dk_h, s);
}

}  // namespace ggtrain::kernels
