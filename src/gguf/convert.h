#pragma once
// Element conversions between float and the storage types GGUF checkpoints
// use. The rounding matches ggml's reference routines bit for bit, so files
// we write equal what llama.cpp's own tools would write.
#include <cstddef>
#include <cstdint>

#include "gguf/types.h"
#include "kernels/number_formats.h"

namespace ggtrain::gguf {

// The element math itself (fp16, bf16, Q8_0 blocks) is the kernels'; the
// format names it too.
using kernels::bf16_to_fp32;
using kernels::dequantize_q8_0;
using kernels::fp16_to_fp32;
using kernels::fp32_to_bf16;
using kernels::fp32_to_fp16;
using kernels::kQ8Block;
using kernels::kQ8BlockBytes;
using kernels::quantize_q8_0;

// Bytes needed to store n elements of type t (n a multiple of its block size).
size_t storage_bytes(TensorType t, size_t n);
// Convert n floats to type t (F32, F16, BF16, Q8_0, and the block formats
// of quant/blocks.h: Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K).
void encode_floats(TensorType t, const float* x, uint8_t* out, size_t n);
// Convert n elements of type t (any of those) to floats.
void decode_floats(TensorType t, const uint8_t* in, float* y, size_t n);
bool is_float_convertible(TensorType t);

}  // namespace ggtrain::gguf
