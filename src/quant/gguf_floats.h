#pragma once
// GGUF tensors as floats, through the type table (quant/type_traits.h):
// reading any tensor type ggtrain computes with, and registering floats to
// be written as any of them.
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"

namespace ggtrain::quant {

// A copy of tensor t of f as floats; an Error naming the file, the tensor
// and the types that can be converted for any other type.
std::vector<float> tensor_floats(const gguf::GgufFile& f, const gguf::TensorInfo& t);

// Registers `data` (n floats, valid until w.write()) to be stored as `type`.
void add_float_tensor(gguf::GgufWriter& w, const std::string& name, gguf::TensorType type, std::vector<uint64_t> ne,
                      const float* data);

}  // namespace ggtrain::quant
