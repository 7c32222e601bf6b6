// The decoder's Gated DeltaNet (Qwen3.5, Sublayer::kGatedDeltaNet): a step
// over the sequence's rule state and convolution state, and the snapshots
// that let that state, which cannot be cut back, restart after truncate().
#include "infer/decoder.h"

#include <algorithm>

#include "kernels/gated_deltanet.h"

namespace ggtrain::infer {

// The convolution reads the taps - 1 positions before each new one: the
// sequence's conv state, then the segment's rows, in one window. Row r's
// inputs sit at window row kept + r, so a segment's conv state goes just
// before its first row, over rows of the segment before it, which is done
// by then (segments run in order).
void Decoder::gdn_mixer(int64_t l, int64_t n) {
  const Layer& L = layers_[size_t(l)];
  const kernels::GdnShape s = gdn_shape();
  const int64_t CD = s.conv_dim(), VD = s.value_dim(), H = s.n_v_heads, kept = s.taps - 1;
  project(L.gdn_qkv, h_.data(), gdn_window_.data() + kept * CD, n);
  project(L.gdn_gate, h_.data(), gdn_z_.data(), n);
  project(L.ssm_beta, h_.data(), gdn_b_.data(), n);
  project(L.ssm_alpha, h_.data(), gdn_alpha_.data(), n);
  for (const Segment& g : segments_) {
    Sequence& q = seqs_[size_t(g.seq)];
    std::vector<float>& conv_state = q.gdn_conv_state[size_t(l)];
    float* window = gdn_window_.data() + g.row * CD;
    std::copy(conv_state.begin(), conv_state.end(), window);
    kernels::gdn_decode(gdn_y_.data() + g.row * VD, q.gdn_state[size_t(l)].data(), window, gdn_z_.data() + g.row * VD,
                        gdn_b_.data() + g.row * H, gdn_alpha_.data() + g.row * H, L.ssm_conv.data(), L.ssm_dt.data(),
                        L.ssm_a.data(), L.ssm_norm.data(), s, kept, g.n);
    std::copy_n(window + g.n * CD, kept * CD, conv_state.begin());
  }
  project(L.ssm_out, gdn_y_.data(), tmp_.data(), n);
}

void Decoder::restore_recurrent_state() {
  Sequence& q = seqs_[0];
  if (q.gdn_state.empty() || q.gdn_position == position()) return;
  const std::vector<int32_t> kept = q.cache.tokens();
  // truncate() left only snapshots at or before the kept prefix
  const Snapshot* s = snapshots_.empty() ? nullptr : &snapshots_.back();
  const int64_t from = s ? s->position : 0;
  q.cache.truncate(from);
  if (s) {
    q.gdn_state = s->state;
    q.gdn_conv_state = s->conv_state;
  } else {
    for (auto& st : q.gdn_state) std::fill(st.begin(), st.end(), 0.0f);
    for (auto& st : q.gdn_conv_state) std::fill(st.begin(), st.end(), 0.0f);
  }
  q.gdn_position = from;
  if (int64_t(kept.size()) > from) eval(kept.data() + from, int64_t(kept.size()) - from, false);
}

void Decoder::save_snapshot() {
  const Sequence& q = seqs_[0];
  if (q.gdn_state.empty()) return;
  if (!snapshots_.empty() && snapshots_.back().position == q.gdn_position) snapshots_.pop_back();
  if (snapshots_.size() == kSnapshots) snapshots_.erase(snapshots_.begin());
  snapshots_.push_back({q.gdn_position, q.gdn_state, q.gdn_conv_state});
}

}  // namespace ggtrain::infer
