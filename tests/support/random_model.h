#pragma once
// A small random model of any architecture, written as its GGUF: what the
// decoder, export and config tests read back.
#include <cmath>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/init.h"
#include "model/params.h"

namespace ggtrain::test_support {

// vocab 96, d_model 64, 2 layers of 4 heads, d_ff 96, context 48.
inline model::Config small_model_config(bool tied, int64_t n_kv_heads) {
  model::Config c;
  c.vocab = 96;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = n_kv_heads;
  c.d_ff = 96;
  c.ctx = 48;
  c.tied = tied;
  return c;
}

// Random weights (biases and norms moved off their start) written as the
// config's architecture; returns the parameters.
inline std::vector<float> write_random_model(const model::Config& c, const std::string& path) {
  model::ParamLayout layout(c);
  std::vector<float> p(static_cast<size_t>(layout.total()));
  model::init_params(c, layout, p.data(), 5, 0.2);  // large weights: logits that matter
  // Biases (init: 0), head norms and post-norms (init: 1) away from their start, so a
  // decoder that skipped or swapped one would be seen.
  for (const auto& t : layout.tensors())
    if (t.name.ends_with(".bias") || t.name.ends_with("_q_norm.weight") || t.name.ends_with("_k_norm.weight") ||
        t.name.ends_with("post_attention_norm.weight") || t.name.ends_with("post_ffw_norm.weight"))
      for (int64_t i = 0; i < t.size; ++i)
        p[size_t(t.offset + i)] += float(0.3 * std::sin(double(i) * 0.7 + double(t.offset % 97)));
  gguf::GgufWriter w;
  model::add_model_tensors(w, c, layout, p.data());
  w.write(path);
  return p;
}

}  // namespace ggtrain::test_support
