#pragma once
// ggml's block formats for quantized weights beyond Q8_0 (which lives in
// kernels/number_formats): Q4_0, Q4_1, Q5_0, Q5_1 (32 weights a block) and the
// K-quants Q4_K, Q5_K, Q6_K (256 weights a super-block). Each quantizer is
// ggml's reference routine (quantize_row_*_ref, no importance matrix), step
// for step in float, so a file quantized here is byte-identical to what
// llama.cpp's llama_model_quantize writes. Dequantizers are ggml's too.
#include <cstddef>
#include <cstdint>

namespace ggtrain::quant {

constexpr size_t kSuperBlock = 256;  // ggml's QK_K

// Q5_1's dot type, Q8_1, rounds as Q8_0 (round_activations_for) and also
// carries each block's s = fp16(d * the sum of its quants), d = amax / 127
// before its own fp16 rounding, and ggml multiplies
// the weight block's min by that s. The rounded activations (y of
// round_activations_for) give min * (their sum) instead; out[b] is
// s - (their sum) for each of the n / 32 blocks of x, so that ggml's dot is
// (dequantized weights) . y + sum over blocks of min * out[b].
void q8_1_sum_rounding(const float* x, const float* rounded, float* out, size_t n);
// The fp16 min of each of the n / 32 Q4_1 (Q5_1) blocks in `in`.
void q4_1_mins(const uint8_t* in, float* mins, size_t n);
void q5_1_mins(const uint8_t* in, float* mins, size_t n);

// Q4_0 and Q5_0 blocks re-encoded exactly as Q8_0 blocks (same fp16 scale,
// the quants recentred as int8): n weights, 34 bytes per 32 out.
void q4_0_to_q8_0(const uint8_t* in, uint8_t* out, size_t n);
void q5_0_to_q8_0(const uint8_t* in, uint8_t* out, size_t n);

// One codec per format (the files implementing them); quant/type_traits.h
// holds them in its table by type.
void quantize_q4_0(const float* x, uint8_t* out, size_t n);
void quantize_q4_1(const float* x, uint8_t* out, size_t n);
void quantize_q5_0(const float* x, uint8_t* out, size_t n);
void quantize_q5_1(const float* x, uint8_t* out, size_t n);
void dequantize_q4_0(const uint8_t* in, float* y, size_t n);
void dequantize_q4_1(const uint8_t* in, float* y, size_t n);
void dequantize_q5_0(const uint8_t* in, float* y, size_t n);
void dequantize_q5_1(const uint8_t* in, float* y, size_t n);
void quantize_q4_k(const float* x, uint8_t* out, size_t n);
void quantize_q5_k(const float* x, uint8_t* out, size_t n);
void quantize_q6_k(const float* x, uint8_t* out, size_t n);
void dequantize_q4_k(const uint8_t* in, float* y, size_t n);
void dequantize_q5_k(const uint8_t* in, float* y, size_t n);
void dequantize_q6_k(const uint8_t* in, float* y, size_t n);
void round_q8_k(const float* x, float* y, size_t n);

// The same formats quantized against an importance matrix, as llama.cpp's
// llama-quantize --imatrix does (ggml's quantize_row_*_impl with
// quant_weights): one row of n weights (n a multiple of the block), qw its n
// importance values (the mean squared input of each column). The legacy
// types weigh each value by qw * sqrt(sigma2 + x^2), sigma2 the row's mean
// square; the K-quants search each sub-block's scale (and min) under those
// weights and then the super-block's scales under their sums.
void quantize_q4_0_weighted(const float* x, const float* qw, uint8_t* out, size_t n);
void quantize_q4_1_weighted(const float* x, const float* qw, uint8_t* out, size_t n);
void quantize_q5_0_weighted(const float* x, const float* qw, uint8_t* out, size_t n);
void quantize_q5_1_weighted(const float* x, const float* qw, uint8_t* out, size_t n);
void quantize_q4_k_weighted(const float* x, const float* qw, uint8_t* out, size_t n);
void quantize_q5_k_weighted(const float* x, const float* qw, uint8_t* out, size_t n);
void quantize_q6_k_weighted(const float* x, const float* qw, uint8_t* out, size_t n);

}  // namespace ggtrain::quant
