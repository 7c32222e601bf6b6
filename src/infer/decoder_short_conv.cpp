// The decoder's short convolution (LFM2, Sublayer::kShortConv): a step over
// the sequence's convolution history.
#include "infer/decoder.h"

#include "kernels/short_conv.h"

namespace ggtrain::infer {

// The convolution reads the taps - 1 positions before each new one from the
// layer's history (zeros before position 0), as llama.cpp's conv state.
void Decoder::conv_mixer(int64_t l, int64_t n) {
  const Layer& L = layers_[size_t(l)];
  const int64_t C = cfg_.d_model;
  project(L.conv_in, h_.data(), bcx_.data(), n);
  for (const Segment& s : segments_) {
    const kernels::ShortConvShape shape{1, s.pos + s.n, C, cfg_.shortconv_l_cache, nullptr, s.pos};
    float* no_v = nullptr;  // y goes to h_, free once in_proj has read it
    kernels::short_conv_forward(h_.data() + s.row * C, no_v, seqs_[size_t(s.seq)].conv_history[size_t(l)].data(),
                                bcx_.data() + s.row * 3 * C, L.conv_kernel.data(), shape);
  }
  project(L.conv_out, h_.data(), tmp_.data(), n);
}

}  // namespace ggtrain::infer
