#pragma once
// What ggtrain can compute with, per ggml tensor type: one row per type
// (quant/type_traits.cpp), as ggml's own type_traits table is the model.
// gguf/ knows every type's size (gguf/types.h); this table adds, for the
// types we compute with, how to convert them and how the rest of the
// engine treats them. Adding a type is one row here and its codec.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gguf/types.h"

namespace ggtrain::quant {

using DecodeFn = void (*)(const uint8_t* in, float* y, size_t n);
using EncodeFn = void (*)(const float* x, uint8_t* out, size_t n);
using RoundFn = void (*)(const float* x, float* y, size_t n);
// One row of n weights quantized against its n importance values qw.
using WeightedEncodeFn = void (*)(const float* x, const float* qw, uint8_t* out, size_t n);

// How the decoder holds a weight matrix of the type (nn::PackedMatrix).
enum class DecodeForm {
  kFloat,  // F32 as it is
  kWidened,  // converted to F32 once; the activations are still rounded as ggml's dot type
  kQ8_0,  // Q8_0 rows (repacked for VNNI where the CPU has it)
  kAsQ8_0,  // re-encoded exactly as Q8_0 (to_q8_0) and then held as Q8_0
  kKRows,  // K-quant super-blocks unpacked (quant/k_rows)
};

struct TypeCodec {
  gguf::TensorType type;
  uint32_t block_size;  // elements per block; checked against gguf/types.h at compile time
  DecodeFn to_float;  // n elements (a multiple of block_size) to floats
  EncodeFn from_float;  // ggml's reference quantizer (no importance matrix), byte for byte
  // What ggml's dot product sees of the activations for a weight of this
  // type (its vec_dot_type): null for F32, which uses them as they are.
  RoundFn round_activations;
  // A frozen base (LoRA, train.freeze) may stay in this type, dequantized
  // band by band, instead of becoming float parameters.
  bool held_base;
  DecodeForm decode;
  void (*to_q8_0)(const uint8_t* in, uint8_t* out, size_t n) = nullptr;  // kAsQ8_0 only
  // The type quantize uses instead for a row that is not a multiple of
  // block_size (llama.cpp's fallback); itself where there is none.
  gguf::TensorType small_row_fallback = type;
  // ggml's quantizer with an importance matrix (llama-quantize --imatrix),
  // one row at a time; null for the types that ignore one (F32, F16, BF16, Q8_0).
  WeightedEncodeFn from_float_weighted = nullptr;
  // Q4_1, Q5_1: each block's fp16 min, which ggml's dot product multiplies by
  // its Q8_1 activations' block sums (nn::PackedMatrix adds that term).
  void (*block_mins)(const uint8_t* in, float* mins, size_t n) = nullptr;
};

// Every row, in the order of ggml's type ids.
std::span<const TypeCodec> all_codecs();
// The row of t, or null for a type ggtrain cannot compute with.
const TypeCodec* find_codec(gguf::TensorType t);
// The row of t, or an Error "cannot WHAT TYPE (F32, F16, ... can)".
const TypeCodec& codec(gguf::TensorType t, std::string_view what);
// The names of every type with a row, "F32, F16, ...": for messages.
std::string codec_type_names();

// Floats <-> storage for any type with a row; n a multiple of its block size.
void encode_floats(gguf::TensorType t, const float* x, uint8_t* out, size_t n);
void decode_floats(gguf::TensorType t, const uint8_t* in, float* y, size_t n);
bool is_float_convertible(gguf::TensorType t);

// x rounded as ggml's dot product for a weight of type t sees it (the row's
// round_activations; x itself for F32); n a multiple of that rounding's
// block (32, or 256 for the K-quants' Q8_K); y may equal x.
void round_activations_for(gguf::TensorType t, const float* x, float* y, size_t n);

}  // namespace ggtrain::quant
