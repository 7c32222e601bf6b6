// The decoder's dense gated feed-forward (Sublayer::kDenseFfn).
#include "infer/decoder.h"

#include "kernels/elementwise.h"
#include "model/family_ops.h"

namespace ggtrain::infer {

void Decoder::dense_ffn(int64_t l, int64_t n) {
  const Layer& L = layers_[size_t(l)];
  project(L.w_gate, h_.data(), gate_.data(), n);
  project(L.w_up, h_.data(), up_.data(), n);
  model::ffn_gate_forward(cfg_.architecture().ffn_activation, gate_.data(), gate_.data(), up_.data(), n * cfg_.d_ff);
  project(L.w_down, gate_.data(), tmp_.data(), n);
}

}  // namespace ggtrain::infer
