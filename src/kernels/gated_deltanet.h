#pragma once
// The mixer of a Gated DeltaNet layer (Qwen3.5's linear attention) between
// its input projections and its output projection, as llama.cpp's qwen35
// graph computes it (build_layer_attn_linear):
//   c      = silu(causal depthwise conv of u over `taps` positions)   u = attn_qkv(h)
//   q, k, v = c split [n_k*d | n_k*d | n_v*d]; q, k L2-normed per head:
//            x / sqrt(sum x^2 + eps) (ggml: rms_norm(x, eps/d) / sqrt(d))
//   beta   = sigmoid(b),  g = softplus(alpha + dt_bias) * a            b, alpha: ssm_beta(h), ssm_alpha(h)
//   o      = the gated delta rule (kernels/gated_delta_rule.h; training runs
//            its chunked form, kernels/gated_delta_rule_chunked.h)
//   y      = rmsnorm(o per head, eps) * norm_w * silu(z)              z = attn_gate(h); then ssm_out(y)
// with its backward. a is the GGUF's ssm_a (-exp(A_log)), softplus ggml's
// (x > 20: x). Packed documents start the convolution and the state at zero.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/gated_delta_rule_chunked.h"
#include "kernels/parallel.h"

namespace ggtrain::kernels {

struct GdnShape {
  int64_t batch = 1, seq = 0;
  int64_t n_v_heads = 0, n_k_heads = 0, d = 0;  // heads of d for keys and values
  int64_t taps = 4;  // the convolution's width (GGUF <arch>.ssm.conv_kernel)
  double eps = 1e-6;  // <arch>.attention.layer_norm_rms_epsilon: the L2 norms' and the output norm's
  int64_t chunk = 64;  // the delta rule's chunks (and checkpoints)
  const int32_t* doc_start = nullptr;
  int64_t rows() const { return batch * seq; }
  int64_t key_dim() const { return n_k_heads * d; }
  int64_t value_dim() const { return n_v_heads * d; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  DeltaRuleShape rule() const { return {batch, seq, n_v_heads, n_k_heads, d, chunk, doc_start}; }
};

// What forward keeps for backward, planned by the caller (floats each).
template <typename T>
struct GdnActs {
  // The convolution's output before silu is not kept: the backward
  // recomputes it from u (taps multiply-adds an element), a conv_dim row a
  // position less to hold.
  T* qkv;  // [rows, conv_dim] silu(the convolution), q and k then L2-normed in place
  T* inv_q;  // [rows, n_k] 1 / sqrt(sum q^2 + eps)
  T* inv_k;  // [rows, n_k]
  T* beta;  // [rows, n_v] sigmoid(b)
  T* g;  // [rows, n_v] log-decay
  T* o;  // [rows, n_v, d] the rule's output
  T* rstd_o;  // [rows, n_v]
  T* checkpoints;  // DeltaRuleShape::checkpoint_floats()
};

namespace detail {

template <typename T>
T gdn_silu(T x) {
  return x / (T(1) + std::exp(-x));
}
template <typename T>
T gdn_silu_grad(T x) {
  const T s = T(1) / (T(1) + std::exp(-x));
  return s * (T(1) + x * (T(1) - s));
}
template <typename T>
T gdn_softplus(T x) {
  return x > T(20) ? x : std::log(T(1) + std::exp(x));
}
inline bool gdn_in_document(const GdnShape& s, int64_t b, int64_t t, int64_t src) {
  return src >= 0 && (!s.doc_start || src >= s.doc_start[b * s.seq + t]);
}
// The causal depthwise convolution of u at row r (sequence b, position t),
// channel ch, over the positions of t's document.
template <typename T>
T gdn_conv_at(const T* u, const T* conv_w, const GdnShape& s, int64_t r, int64_t ch) {
  const int64_t b = r / s.seq, t = r % s.seq, CD = s.conv_dim(), L = s.taps;
  T acc = T(0);
  for (int64_t j = 0; j < L; ++j) {
    const int64_t src = t - (L - 1) + j;
    if (gdn_in_document(s, b, t, src)) acc += conv_w[ch * L + j] * u[(b * s.seq + src) * CD + ch];
  }
  return acc;
}

}  // namespace detail

// Scratch of the forward and backward passes, planned by the caller once
// and shared by every layer (gdn_scratch_floats(s) floats): q, k and v as
// the rule reads them ([rows, heads, d] each), and the backward's gradients.
template <typename T>
struct GdnScratch {
  T *q, *k, *v;  // [rows, n_k, d], [rows, n_k, d], [rows, n_v, d]
  T *d_o, *dq, *dk, *dv, *dg, *dbeta, *rule, *dconv;
};
inline int64_t gdn_scratch_floats(const GdnShape& s) {
  const int64_t R = s.rows();
  return R * (2 * s.key_dim() + s.value_dim()) + R * (2 * s.value_dim() + 2 * s.key_dim() + 2 * s.n_v_heads) +
         delta_rule_backward_scratch(s.rule()) + R * s.conv_dim();
}
template <typename T>
GdnScratch<T> gdn_scratch(T* base, const GdnShape& s) {
  const int64_t R = s.rows(), KD = s.key_dim(), VD = s.value_dim(), H = s.n_v_heads;
  auto take = [&](int64_t n) {
    T* p = base;
    base += n;
    return p;
  };
  GdnScratch<T> x;
  x.q = take(R * KD), x.k = take(R * KD), x.v = take(R * VD);
  x.d_o = take(R * VD), x.dq = take(R * KD), x.dk = take(R * KD), x.dv = take(R * VD);
  x.dg = take(R * H), x.dbeta = take(R * H);
  x.rule = take(delta_rule_backward_scratch(s.rule()));
  x.dconv = take(R * s.conv_dim());
  return x;
}

// q, k and v of qkv's rows ([rows, conv_dim], strided views), copied into
// x.q, x.k, x.v as the rule reads them.
template <typename T>
void split_qkv(const GdnScratch<T>& x, const T* qkv, const GdnShape& s) {
  const int64_t CD = s.conv_dim(), KD = s.key_dim(), VD = s.value_dim();
#pragma omp parallel for schedule(static) if (s.rows() * CD >= kMinParallelWork)
  for (int64_t r = 0; r < s.rows(); ++r) {
    std::copy(qkv + r * CD, qkv + r * CD + KD, x.q + r * KD);
    std::copy(qkv + r * CD + KD, qkv + r * CD + 2 * KD, x.k + r * KD);
    std::copy(qkv + r * CD + 2 * KD, qkv + (r + 1) * CD, x.v + r * VD);
  }
}

template <typename T, typename Y>
void gdn_forward(Y* y, const GdnActs<T>& a, const GdnScratch<T>& x, const T* u, const T* z, const T* b_raw,
                 const T* alpha, const T* conv_w, const T* dt_bias, const T* ssm_a, const T* norm_w,
                 const GdnShape& s) {
  const int64_t R = s.rows(), CD = s.conv_dim(), KD = s.key_dim(), H = s.n_v_heads, HK = s.n_k_heads, d = s.d;
  const bool par = R * CD >= kMinParallelWork;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t ch = 0; ch < CD; ++ch) a.qkv[r * CD + ch] = detail::gdn_silu(detail::gdn_conv_at(u, conv_w, s, r, ch));
    for (int64_t part = 0; part < 2; ++part)  // q, then k: each head L2-normed
      for (int64_t h = 0; h < HK; ++h) {
        T* x = a.qkv + r * CD + part * KD + h * d;
        T ss = T(0);
        for (int64_t i = 0; i < d; ++i) ss += x[i] * x[i];
        const T inv = T(1) / std::sqrt(ss + T(s.eps));
        (part ? a.inv_k : a.inv_q)[r * HK + h] = inv;
        for (int64_t i = 0; i < d; ++i) x[i] *= inv;
      }
    for (int64_t h = 0; h < H; ++h) {
      a.beta[r * H + h] = T(1) / (T(1) + std::exp(-b_raw[r * H + h]));
      a.g[r * H + h] = detail::gdn_softplus(alpha[r * H + h] + dt_bias[h]) * ssm_a[h];
    }
  }
  split_qkv(x, a.qkv, s);
  delta_rule_chunked_forward(a.o, a.checkpoints, x.q, x.k, x.v, a.g, a.beta, s.rule());
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const T* o = a.o + (r * H + h) * d;
      T ss = T(0);
      for (int64_t i = 0; i < d; ++i) ss += o[i] * o[i];
      const T rstd = T(1) / std::sqrt(ss / T(d) + T(s.eps));
      a.rstd_o[r * H + h] = rstd;
      for (int64_t i = 0; i < d; ++i) {
        const int64_t at = r * s.value_dim() + h * d + i;
        store(y + at, o[i] * rstd * norm_w[i] * detail::gdn_silu(z[at]));
      }
    }
}

// From dy: du, dz, db_raw, dalpha (written); d_conv_w, d_dt_bias, d_ssm_a,
// d_norm_w (added to; each may be null when frozen). Sums over positions
// run in a fixed order: the result does not depend on the thread count.
template <typename T>
void gdn_backward(T* du, T* dz, T* db_raw, T* dalpha, T* d_conv_w, T* d_dt_bias, T* d_ssm_a, T* d_norm_w, const T* dy,
                  const GdnActs<T>& a, const GdnScratch<T>& x, const T* u, const T* z, const T* alpha, const T* conv_w,
                  const T* dt_bias, const T* ssm_a, const T* norm_w, const GdnShape& s) {
  const int64_t R = s.rows(), CD = s.conv_dim(), KD = s.key_dim(), VD = s.value_dim(), H = s.n_v_heads;
  const int64_t HK = s.n_k_heads, d = s.d, L = s.taps;
  const bool par = R * CD >= kMinParallelWork;
  // The gated output norm: y = o rstd w silu(z).
  T* d_o = x.d_o;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const T* o = a.o + (r * H + h) * d;
      const T rstd = a.rstd_o[r * H + h];
      T dot = T(0);
      for (int64_t i = 0; i < d; ++i) {
        const int64_t at = r * VD + h * d + i;
        const T dn = dy[at] * norm_w[i] * detail::gdn_silu(z[at]);  // d(normed o)
        dz[at] = dy[at] * o[i] * rstd * norm_w[i] * detail::gdn_silu_grad(z[at]);
        d_o[at] = dn;
        dot += dn * o[i] * rstd;
      }
      for (int64_t i = 0; i < d; ++i) {
        T& g = d_o[r * VD + h * d + i];
        g = rstd * (g - o[i] * rstd * dot / T(d));
      }
    }
  if (d_norm_w)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < d; ++i) {
          const int64_t at = r * VD + h * d + i;
          d_norm_w[i] += dy[at] * a.o[(r * H + h) * d + i] * a.rstd_o[r * H + h] * detail::gdn_silu(z[at]);
        }
  // The rule.
  split_qkv(x, a.qkv, s);
  T *dq = x.dq, *dk = x.dk, *dv = x.dv, *dg = x.dg, *dbeta = x.dbeta;
  delta_rule_chunked_backward(dq, dk, dv, dg, dbeta, x.rule, d_o, a.checkpoints, x.q, x.k, x.v, a.g, a.beta, s.rule());
  // The gates.
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const T bt = a.beta[r * H + h], pre = alpha[r * H + h] + dt_bias[h];
      db_raw[r * H + h] = dbeta[size_t(r * H + h)] * bt * (T(1) - bt);
      const T sig = pre > T(20) ? T(1) : T(1) / (T(1) + std::exp(-pre));  // softplus' (ggml's threshold)
      dalpha[r * H + h] = dg[size_t(r * H + h)] * ssm_a[h] * sig;
      if (d_dt_bias) d_dt_bias[h] += dalpha[r * H + h];
      if (d_ssm_a) d_ssm_a[h] += dg[size_t(r * H + h)] * detail::gdn_softplus(pre);
    }
  // Through the L2 norms and silu into d(conv output): dact [rows, conv_dim].
  T* dconv = x.dconv;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t h = 0; h < HK; ++h) {
        const T* yn = a.qkv + r * CD + part * KD + h * d;  // normed
        const T* dyn = (part ? dk : dq) + (r * HK + h) * d;
        const T inv = (part ? a.inv_k : a.inv_q)[r * HK + h];
        T dot = T(0);
        for (int64_t i = 0; i < d; ++i) dot += dyn[i] * yn[i];
        for (int64_t i = 0; i < d; ++i) dconv[size_t(r * CD + part * KD + h * d + i)] = inv * (dyn[i] - yn[i] * dot);
      }
    for (int64_t i = 0; i < VD; ++i) dconv[size_t(r * CD + 2 * KD + i)] = dv[size_t(r * VD + i)];
    for (int64_t ch = 0; ch < CD; ++ch)
      dconv[size_t(r * CD + ch)] *= detail::gdn_silu_grad(detail::gdn_conv_at(u, conv_w, s, r, ch));
  }
  // The convolution: du[src] from the outputs that read it, dw over positions.
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = r / s.seq, src = r % s.seq;
    for (int64_t ch = 0; ch < CD; ++ch) {
      T acc = T(0);
      for (int64_t j = 0; j < L; ++j) {
        const int64_t t = src + (L - 1) - j;
        if (t < s.seq && detail::gdn_in_document(s, b, t, src))
          acc += conv_w[ch * L + j] * dconv[size_t((b * s.seq + t) * CD + ch)];
      }
      du[r * CD + ch] = acc;
    }
  }
  if (!d_conv_w) return;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t ch = 0; ch < CD; ++ch)
    for (int64_t r = 0; r < R; ++r) {
      const int64_t b = r / s.seq, t = r % s.seq;
      for (int64_t j = 0; j < L; ++j) {
        const int64_t src = t - (L - 1) + j;
        if (detail::gdn_in_document(s, b, t, src))
          d_conv_w[ch * L + j] += dconv[size_t(r * CD + ch)] * u[(b * s.seq + src) * CD + ch];
      }
    }
}

namespace detail {

// Decoding position t: qkv (conv_dim) = silu(the convolution over u_history),
// q and k L2-normed per head. The history is one sequence of one document,
// so the convolution is training's at row t of a batch of one.
template <typename T>
void gdn_decode_qkv(T* qkv, const T* u_history, const T* conv_w, const GdnShape& s, int64_t t) {
  const int64_t CD = s.conv_dim(), KD = s.key_dim(), d = s.d;
  GdnShape history = s;
  history.batch = 1, history.seq = t + 1, history.doc_start = nullptr;
  for (int64_t ch = 0; ch < CD; ++ch) qkv[ch] = gdn_silu(gdn_conv_at(u_history, conv_w, history, t, ch));
  for (int64_t part = 0; part < 2; ++part)
    for (int64_t h = 0; h < s.n_k_heads; ++h) {
      T* x = qkv + part * KD + h * d;
      T ss = T(0);
      for (int64_t e = 0; e < d; ++e) ss += x[e] * x[e];
      const T inv = T(1) / std::sqrt(ss + T(s.eps));
      for (int64_t e = 0; e < d; ++e) x[e] *= inv;
    }
}

// One head's y (d) from the rule's o (d): rmsnorm(o) * norm_w * silu(z).
template <typename T>
void gdn_decode_gated_norm(T* y, const T* o, const T* z, const T* norm_w, const GdnShape& s) {
  T ss = T(0);
  for (int64_t e = 0; e < s.d; ++e) ss += o[e] * o[e];
  const T rstd = T(1) / std::sqrt(ss / T(s.d) + T(s.eps));
  for (int64_t e = 0; e < s.d; ++e) y[e] = o[e] * rstd * norm_w[e] * gdn_silu(z[e]);
}

}  // namespace detail

// Runs of at least this many positions (prompts) take the rule's chunked
// form, a few GEMMs a chunk, instead of one state update per position.
constexpr int64_t kGdnChunkedPrefillMin = 16;

// Decoding one sequence: the n positions after `pos` cached ones.
// u_history [pos + n, conv_dim] holds the convolution input of every
// position, the new rows written by the caller; z [n, value_dim], b_raw and
// alpha [n, n_v_heads] are the new rows' projections; state [n_v_heads, d,
// d] is the rule's S, carried from call to call (zero before position 0).
// y [n, value_dim]. A token (or a short run) takes the recurrent form, a
// prompt the chunked one, as training does (the same outputs, other roundings).
template <typename T>
void gdn_decode(T* y, T* state, const T* u_history, const T* z, const T* b_raw, const T* alpha, const T* conv_w,
                const T* dt_bias, const T* ssm_a, const T* norm_w, const GdnShape& s, int64_t pos, int64_t n) {
  const int64_t CD = s.conv_dim(), KD = s.key_dim(), VD = s.value_dim(), H = s.n_v_heads, HK = s.n_k_heads, d = s.d;
  const T scale = T(1) / std::sqrt(T(d));
  auto beta_of = [&](int64_t i, int64_t h) { return T(1) / (T(1) + std::exp(-b_raw[i * H + h])); };
  auto g_of = [&](int64_t i, int64_t h) { return detail::gdn_softplus(alpha[i * H + h] + dt_bias[h]) * ssm_a[h]; };
  if (n >= kGdnChunkedPrefillMin) {
    std::vector<T> q(static_cast<size_t>(n * KD)), k(static_cast<size_t>(n * KD)), v(static_cast<size_t>(n * VD)),
        g(static_cast<size_t>(n * H)), beta(static_cast<size_t>(n * H)), o(static_cast<size_t>(n * VD));
#pragma omp parallel if (n * CD * s.taps >= kMinParallelWork)
    {
      std::vector<T> qkv(static_cast<size_t>(CD));
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        detail::gdn_decode_qkv(qkv.data(), u_history, conv_w, s, pos + i);
        std::copy_n(qkv.data(), KD, q.data() + i * KD);
        std::copy_n(qkv.data() + KD, KD, k.data() + i * KD);
        std::copy_n(qkv.data() + 2 * KD, VD, v.data() + i * VD);
        for (int64_t h = 0; h < H; ++h) g[size_t(i * H + h)] = g_of(i, h), beta[size_t(i * H + h)] = beta_of(i, h);
      }
    }
    const DeltaRuleShape prompt{1, n, H, HK, d, s.chunk, nullptr};
    delta_rule_chunked_forward(o.data(), static_cast<T*>(nullptr), q.data(), k.data(), v.data(), g.data(), beta.data(),
                               prompt, state);
#pragma omp parallel for schedule(static) if (n * VD >= kMinParallelWork)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < H; ++h)
        detail::gdn_decode_gated_norm(y + i * VD + h * d, o.data() + i * VD + h * d, z + i * VD + h * d, norm_w, s);
    return;
  }
  std::vector<T> qkv(static_cast<size_t>(CD)), o(static_cast<size_t>(VD));
  for (int64_t i = 0; i < n; ++i) {
    detail::gdn_decode_qkv(qkv.data(), u_history, conv_w, s, pos + i);
#pragma omp parallel for schedule(static) if (H * d * d >= kMinParallelWork)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<T> delta(static_cast<size_t>(d));
      const int64_t hk = h % HK;
      detail::delta_rule_step(state + h * d * d, o.data() + h * d, static_cast<T*>(nullptr), qkv.data() + hk * d,
                              qkv.data() + KD + hk * d, qkv.data() + 2 * KD + h * d, g_of(i, h), beta_of(i, h), scale,
                              d, delta.data());
      detail::gdn_decode_gated_norm(y + i * VD + h * d, o.data() + h * d, z + i * VD + h * d, norm_w, s);
    }
  }
}

}  // namespace ggtrain::kernels
