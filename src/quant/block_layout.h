#pragma once
// Field access inside ggml's block layouts, shared by the quantizers and
// dequantizers (legacy_blocks, k_blocks) and the decoder's unpacking (k_rows).
// Internal to quant/.
#include <cstdint>
#include <cstring>

#include "gguf/types.h"
#include "kernels/number_formats.h"

namespace ggtrain::quant::detail {

inline void put_half(uint8_t* p, float v) {
  const uint16_t h = kernels::fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

inline float get_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return kernels::fp16_to_fp32(h);
}

// Sub-block j's 6-bit scale and min from a Q4_K/Q5_K block's 12 packed bytes
// (ggml's get_scale_min_k4).
inline void scale_min(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Quant i (0..255) of a Q4_K block: per 64 weights the first 32 in the low
// nibbles of 32 bytes, the next 32 in their high nibbles.
inline int q4_k_quant(const uint8_t* block, int i) {
  const uint8_t byte = block[16 + (i / 64) * 32 + i % 32];
  return (i % 64) < 32 ? (byte & 0xF) : (byte >> 4);
}

// Quant i of a Q5_K block: the same nibbles, the fifth bit of weight
// j + 64 k (+ 32) in bit 2k (2k + 1) of qh[j].
inline int q5_k_quant(const uint8_t* block, int i) {
  const uint8_t byte = block[48 + (i / 64) * 32 + i % 32];
  const int low = (i % 64) < 32 ? (byte & 0xF) : (byte >> 4);
  return low + (((block[16 + i % 32] >> (i / 32)) & 1) ? 16 : 0);
}

// Quant i of a Q6_K block, centred (q - 32): per 128 weights, low nibbles of
// (l, l + 64) and (l + 32, l + 96) in ql, their top bit pairs in qh[l].
inline int q6_k_quant(const uint8_t* block, int i) {
  const int half = i / 128, k = (i % 128) / 32, l = i % 32;
  const uint8_t low = block[64 * half + l + 32 * (k % 2)];
  const int lo4 = k < 2 ? (low & 0xF) : (low >> 4);
  const int hi2 = (block[128 + 32 * half + l] >> (2 * k)) & 3;
  return (lo4 | (hi2 << 4)) - 32;
}

// A K-quant block's factors as ggml's dequantizer multiplies them:
// w = d * sc * q - dmin * m (Q4_K, Q5_K) or d * sc * (q - 32) (Q6_K: dmin
// and m stay 0).
struct KBlockFields {
  float d = 0, dmin = 0;
  int8_t sc[16] = {}, m[16] = {};
};

inline KBlockFields k_block_fields(gguf::TensorType t, const uint8_t* b) {
  KBlockFields f;
  if (t == gguf::TensorType::Q6_K) {
    f.d = get_half(b + 208);
    std::memcpy(f.sc, b + 192, 16);
    return f;
  }
  f.d = get_half(b), f.dmin = get_half(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min(j, b + 4, &sc, &m);
    f.sc[j] = int8_t(sc), f.m[j] = int8_t(m);
  }
  return f;
}

// Quant i of a K-quant block, unsigned as stored (Q6_K: q + 32).
inline int k_stored_quant(gguf::TensorType t, const uint8_t* b, int i) {
  if (t == gguf::TensorType::Q4_K) return q4_k_quant(b, i);
  if (t == gguf::TensorType::Q5_K) return q5_k_quant(b, i);
  return q6_k_quant(b, i) + 32;
}

}  // namespace ggtrain::quant::detail
