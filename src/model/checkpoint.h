#pragma once
// Model weights <-> llama.cpp GGUF, for every architecture of
// model/architecture.h. Writing produces the tensor set and <arch>.*
// metadata llama.cpp's converter writes, so llama.cpp loads the file
// unchanged; reading accepts F32/F16/BF16 and quantized weights.
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/params.h"

namespace ggtrain::model {

// Adds general.architecture, the <arch>.* hyper-parameters and every parameter tensor (stored as
// `type`; 1-D norm weights always F32, and rows not divisible into Q8_0
// blocks fall back to F16, as llama.cpp's quantizer does), then the
// multi-token-prediction block's tensors as `c` carries them (their bytes
// must outlive the write: `c` or a copy of it).
void add_model_tensors(gguf::GgufWriter& w, const Config& c, const ParamLayout& layout, const float* params,
                       gguf::TensorType type = gguf::TensorType::F32);

// Fills `params` (laid out by `layout`) from the file; every tensor must be
// present with the expected shape, and no unknown tensor may be present
// (but those the model holds elsewhere, `held_elsewhere`, and the RoPE
// factors, which config_from_gguf reads).
void load_model_params(const gguf::GgufFile& f, const ParamLayout& layout, float* params,
                       const std::set<std::string>& held_elsewhere = {});

// f's tensor t.name, which must have t's shape (an error naming both
// otherwise): what a hostile file's smaller matrix would be read past.
const gguf::TensorInfo& tensor_of_shape(const gguf::GgufFile& f, const ParamTensor& t);

// ggml ne order (reverse of the row-major shape).
std::vector<uint64_t> ggml_ne(const std::vector<int64_t>& shape);

}  // namespace ggtrain::model
