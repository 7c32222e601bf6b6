#pragma once
// Element conversions between float and the storage types GGUF checkpoints
// use. The rounding matches ggml's reference routines bit for bit, so files
// we write equal what llama.cpp's own tools would write.
#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace ggtrain::gguf {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even; NaN stays quiet NaN

constexpr size_t kQ8Block = 32;
constexpr size_t kQ8BlockBytes = 34;  // fp16 scale + 32 int8

// n must be a multiple of 32.
void quantize_q8_0(const float* x, uint8_t* out, size_t n);
void dequantize_q8_0(const uint8_t* in, float* y, size_t n);

// Bytes needed to store n elements of type t (n a multiple of its block size).
size_t storage_bytes(TensorType t, size_t n);
// Convert n floats to type t (F32, F16, BF16, Q8_0).
void encode_floats(TensorType t, const float* x, uint8_t* out, size_t n);
// Convert n elements of type t (F32, F16, BF16, Q8_0) to floats.
void decode_floats(TensorType t, const uint8_t* in, float* y, size_t n);
bool is_float_convertible(TensorType t);

}  // namespace ggtrain::gguf
