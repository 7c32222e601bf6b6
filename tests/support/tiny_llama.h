#pragma once
// The small llama the model's unit tests start from: grouped-query attention
// (4 query heads on 2 key/value heads), 2 layers, an untied head, a context
// of 16. Tests set what they are about (vocabulary, tying, LoRA, a donor) on
// top of it.
#include <cstdint>

#include "model/config.h"

namespace ggtrain::test_support {

inline model::Config tiny_llama(int64_t vocab) {
  model::Config c;
  c.vocab = vocab;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 48;
  c.ctx = 16;
  return c;
}

}  // namespace ggtrain::test_support
