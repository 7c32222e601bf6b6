#pragma once
// `ggtrain export --type q4_k_m` (and the other quantized file types): the
// model written as llama.cpp's llama_model_quantize writes it, byte for
// byte: its metadata with general.quantization_version and general.file_type
// appended, its tensor order, its per-tensor types (quant/recipe.h) and
// ggml's reference quantizers (quant/blocks.h).
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/reader.h"
#include "quant/recipe.h"

namespace ggtrain::convert {

// The float values of a tensor of `in` (by default read from the file and
// unchanged tensors copied as they are; a merged LoRA model supplies its
// merged weights for every tensor instead).
using FloatSource = std::function<std::vector<float>(const gguf::TensorInfo&)>;

// Metadata that replaces the input's value of the same key (in its place)
// or is added after the input's keys.
using MetadataChanges = std::vector<std::pair<std::string, gguf::Value>>;

struct QuantizeReport {
  int quantized = 0;  // tensors the recipe quantized
  int fallbacks = 0;  // of those, stored in a fallback type (rows not a multiple of its block)
};

QuantizeReport quantize_model(const gguf::GgufFile& in, quant::FileType ft, const std::string& out_path,
                              const FloatSource& floats = {}, const MetadataChanges& changes = {});

}  // namespace ggtrain::convert
