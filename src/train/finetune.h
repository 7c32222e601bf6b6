#pragma once
// Continued training of an existing llama GGUF (init.from): the file decides
// the model; the run config may only agree with it.
#include "gguf/reader.h"
#include "train/run_config.h"

namespace ggtrain::train {

// Sets c.model from the file's llama.* metadata and tensors (shape, context,
// RoPE base, eps, tied head). A model.* key the user set (c.set_keys) to
// another value is an error naming the key, the value and the file's.
void adopt_model_of(RunConfig& c, const gguf::GgufFile& f);

}  // namespace ggtrain::train
