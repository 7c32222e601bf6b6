#pragma once
// Scalar and block number formats: fp16 and bf16 (round to nearest even),
// and Q8_0 blocks (an fp16 scale and 32 int8, ggml's layout). The rounding
// matches ggml's reference routines bit for bit, so the files written with
// them equal what llama.cpp's own tools would write.
#include <cstddef>
#include <cstdint>

namespace ggtrain::kernels {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even; NaN stays quiet NaN

constexpr size_t kQ8Block = 32;
constexpr size_t kQ8BlockBytes = 34;  // fp16 scale + 32 int8

// Bytes of a row of `cols` weights as Q8_0 (cols a multiple of kQ8Block).
constexpr int64_t q8_0_row_bytes(int64_t cols) { return cols / int64_t(kQ8Block) * int64_t(kQ8BlockBytes); }

// n must be a multiple of 32. ggml's reference rounding (quantize_row_q8_0_ref:
// q = round half away from zero of x * (1/d)): what files are written with.
void quantize_q8_0(const float* x, uint8_t* out, size_t n);
void dequantize_q8_0(const uint8_t* in, float* y, size_t n);

// Activations as ggml's CPU backend rounds them for a Q8_0 dot product on
// x86 (its AVX quantize_row_q8_0: q = x * (127/amax) rounded half to even,
// the same fp16 d = amax/127), vectorised; large inputs use all threads.
void quantize_q8_0_activations(const float* x, uint8_t* out, size_t n);
// The same values, dequantized: y = d * q (y may equal x).
void round_q8_0_activations(const float* x, float* y, size_t n);

}  // namespace ggtrain::kernels
