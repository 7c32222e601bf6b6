// The decoder's attention sublayer (Sublayer::kAttention): q/k/v for a
// batch of rows, each segment's causal attention against its sequence's KV
// cache, the output projection.
#include "infer/decoder.h"

#include <omp.h>

#include <algorithm>

#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "model/family_ops.h"

namespace ggtrain::infer {

kernels::AttnShape Decoder::flash_shape(int64_t n) const {
  return {1, n, cfg_.n_heads, cfg_.n_kv_heads, cfg_.d_head()};
}

// Causal attention of a segment's queries against its sequence's cache. A
// prompt into an empty cache is the training forward's causal attention:
// its tiled flash kernel, over this batch's keys and values (already
// rounded as the cache holds them). Otherwise (decode, or a prompt after a
// kept prefix) the cache's own kernel.
// A local layer sees the last sliding_window positions: the flash kernel
// through per-position first keys, the cache's through its window.
void Decoder::attention(int64_t l, const Segment& s, float* scratch, int64_t threads) {
  const bool local = cfg_.is_local_layer(l);
  const int64_t qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
  float* out = att_out_.data() + s.row * qd;
  const float* q = q_.data() + s.row * qd;
  if (s.pos == 0 && s.n >= kFlashPrompt) {
    kernels::AttnShape shape = flash_shape(s.n);
    if (local) shape.doc_start = window_start_.data();
    kernels::attention_forward(out, lse_.data() + s.row * cfg_.n_heads, flash_scratch_.data(), q,
                               k_.data() + s.row * kvd, v_.data() + s.row * kvd, shape);
    return;
  }
  kernels::attention_decode(out, q, seqs_[size_t(s.seq)].cache.layer(l), decode_shape(local ? cfg_.sliding_window : 0),
                            s.pos, s.n, scratch, threads);
}

void Decoder::attention_mixer(int64_t l, int64_t n) {
  const Layer& L = layers_[size_t(l)];
  const int64_t hd = cfg_.d_head(), qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
  const float eps = float(cfg_.rms_eps);
  const bool halves = cfg_.architecture().rope == model::RopeLayout::kHalves;
  const bool local = cfg_.is_local_layer(l);
  const int64_t n_rot = cfg_.n_rot();
  const bool gated = cfg_.architecture().attn_output_gate;
  if (gated) {  // attn_q yields per head [query | gate]
    project(L.wq, h_.data(), q_full_.data(), n);
    model::split_query_gate(q_.data(), attn_gate_.data(), q_full_.data(), n * cfg_.n_heads, hd);
  } else {
    project(L.wq, h_.data(), q_.data(), n);
  }
  project(L.wk, h_.data(), k_.data(), n);
  project(L.wv, h_.data(), v_.data(), n);
  if (!L.bq.empty()) {
    kernels::bias_forward(q_.data(), L.bq.data(), n, cfg_.q_dim());
    kernels::bias_forward(k_.data(), L.bk.data(), n, cfg_.kv_dim());
    kernels::bias_forward(v_.data(), L.bv.data(), n, cfg_.kv_dim());
  }
  if (!L.attn_q_norm.empty()) {  // each head's row (or each token's whole row) normed on its own, in place
    const int64_t qn = cfg_.q_norm_dim(), kn = cfg_.k_norm_dim();
    const int64_t hq = n * cfg_.q_dim() / qn, hk = n * cfg_.kv_dim() / kn;
    kernels::rmsnorm_forward(q_.data(), head_rstd_.data(), q_.data(), L.attn_q_norm.data(), hq, qn, eps);
    kernels::rmsnorm_forward(k_.data(), head_rstd_.data(), k_.data(), L.attn_k_norm.data(), hk, kn, eps);
  }
  for (const Segment& s : segments_) {
    float *q = q_.data() + s.row * qd, *k = k_.data() + s.row * kvd, *v = v_.data() + s.row * kvd;
    if (cfg_.uses_rope(l)) {
      const float* cs = (local ? rope_cos_local_ : rope_cos_).data() + s.pos * n_rot / 2;
      const float* sn = (local ? rope_sin_local_ : rope_sin_).data() + s.pos * n_rot / 2;
      kernels::rope_forward(q, cs, sn, 1, s.n, cfg_.n_heads, hd, halves, n_rot);
      kernels::rope_forward(k, cs, sn, 1, s.n, cfg_.n_kv_heads, hd, halves, n_rot);
    }
    seqs_[size_t(s.seq)].cache.store(l, k, v, s.pos, s.n);
  }
  if (segments_.size() == 1) {
    attention(l, segments_[0], decode_scratch_.data(), threads_);
  } else {  // one token of each sequence: a thread per sequence
    const int64_t per_thread = int64_t(batch_scratch_.size()) / threads_;
#pragma omp parallel for schedule(dynamic, 1) num_threads(int(threads_))
    for (size_t j = 0; j < segments_.size(); ++j)
      attention(l, segments_[j], batch_scratch_.data() + omp_get_thread_num() * per_thread, 1);
  }
  if (gated) model::apply_output_gate(att_out_.data(), att_out_.data(), attn_gate_.data(), n * cfg_.q_dim());
  project(L.wo, att_out_.data(), tmp_.data(), n);
}

}  // namespace ggtrain::infer
