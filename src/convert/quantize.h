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
#include "quant/importance_matrix.h"
#include "quant/recipe.h"

namespace ggtrain::convert {

// The float values of a tensor of `in` (by default read from the file and
// unchanged tensors copied as they are; a merged LoRA model supplies its
// merged weights for every tensor instead).
using FloatSource = std::function<std::vector<float>(const gguf::TensorInfo&)>;

// Metadata that replaces the input's value of the same key (in its place)
// or is added after the input's keys.
using MetadataChanges = std::vector<std::pair<std::string, gguf::Value>>;

// llama-quantize --imatrix FILE: the matrix and the path it came from (both
// are recorded in the output's quantize.imatrix.* keys).
struct ImatrixInput {
  std::string path;
  quant::ImportanceMatrix matrix;
};
// Reads FILE (GGUF or legacy .dat) as llama-quantize does: a GGUF without
// the imatrix.* metadata keys is refused, as there.
ImatrixInput load_imatrix_input(const std::string& path);

struct QuantizeReport {
  int quantized = 0;  // tensors the recipe quantized
  int fallbacks = 0;  // of those, stored in a fallback type (rows not a multiple of its block)
  int weighted = 0;  // of those, quantized against an importance matrix entry
  std::vector<std::string> without_importance;  // quantized with no entry for them (llama-quantize warns)
};

// The importance values llama-quantize --imatrix quantizes tensor `name`
// (ggml shape ne, stored as `type`) against: a row of ne[0] per expert
// (ne[2] rows, or one), the rows of slice s using row s. Empty when `type`
// takes none or the matrix has no entry for the tensor (then named in
// report->without_importance); a mismatched entry is refused, as there,
// but the embedding's (quantized without).
std::vector<float> tensor_importance(const std::string& name, gguf::TensorType type, const std::vector<uint64_t>& ne,
                                     const ImatrixInput& imatrix, QuantizeReport* report);

// imatrix (optional): each tensor with an entry of its name is quantized
// against it (quant::TypeCodec::from_float_weighted), and the recipe makes
// llama.cpp's imatrix choices (Q4_0/Q5_0's first ffn_down layers as Q4_1/Q5_1).
QuantizeReport quantize_model(const gguf::GgufFile& in, quant::FileType ft, const std::string& out_path,
                              const FloatSource& floats = {}, const MetadataChanges& changes = {},
                              const ImatrixInput* imatrix = nullptr);

}  // namespace ggtrain::convert
