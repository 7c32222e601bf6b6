#pragma once
// Continued training of an existing model GGUF (init.from): the file decides
// the model; the run config may only agree with it.
#include "gguf/reader.h"
#include "train/run_config.h"

namespace ggtrain::train {

// Sets c.model from the file's llama.* metadata and tensors (shape, context,
// RoPE base and factors, eps, tied head). A model.* key the user set (c.set_keys) to
// another value is an error naming the key, the value and the file's.
void adopt_model_of(RunConfig& c, const gguf::GgufFile& f);

// What a resumed run takes from the file again, because no config key holds
// it: the RoPE frequency factors (rope_freqs.weight) of a Llama 3.x model
// and the multi-token-prediction blocks of a Qwen3.5 one.
void adopt_file_only_parts_of(RunConfig& c, const gguf::GgufFile& f);

}  // namespace ggtrain::train
