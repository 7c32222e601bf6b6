// Q4_0, Q4_1, Q5_0 and Q5_1: blocks of 32 weights with an fp16 scale (and
// an fp16 min for Q4_1 and Q5_1); ggml's quantize_row_q*_ref and
// dequantize_row_q*.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/block_layout.h"
#include "quant/blocks.h"
#include "quant/rounding.h"

namespace ggtrain::quant {

namespace {

using detail::get_half;
using detail::put_half;

constexpr size_t kBlock = 32;

// The value of largest magnitude (the first of them), with its sign.
float signed_absmax(const float* x) {
  float amax = 0, max = 0;
  for (size_t j = 0; j < kBlock; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  return max;
}

// Q5 blocks keep each quant's fifth bit in a 32-bit mask (element j, j + 16).
uint32_t fifth_bits(const uint8_t* q) {
  uint32_t qh = 0;
  for (size_t j = 0; j < kBlock / 2; ++j) {
    qh |= uint32_t((q[j] & 0x10u) >> 4) << j;
    qh |= uint32_t((q[j + kBlock / 2] & 0x10u) >> 4) << (j + kBlock / 2);
  }
  return qh;
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (size_t j = 0; j < kBlock / 2; ++j) qs[j] = uint8_t((q[j] & 0x0F) | ((q[j + kBlock / 2] & 0x0F) << 4));
}

// The 5-bit quants of a Q5 block: low nibbles from qs, fifth bits from qh.
void unpack_q5(const uint8_t* qh_bytes, const uint8_t* qs, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (size_t j = 0; j < kBlock / 2; ++j) {
    q[j] = int((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10));
    q[j + kBlock / 2] = int((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
  }
}

}  // namespace

// d = max / -8 (the signed extreme maps to -8); q = min(15, trunc(x/d + 8.5)).
void quantize_q4_0(const float* x, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, x += kBlock, out += 18) {
    const float d = signed_absmax(x) / -8;
    const float id = d ? 1.0f / d : 0.0f;
    put_half(out, d);
    uint8_t q[kBlock];
    for (size_t j = 0; j < kBlock; ++j) {
      const int v = int8_t(x[j] * id + 8.5f);
      q[j] = uint8_t(v < 15 ? v : 15);
    }
    pack_nibbles(q, out + 2);
  }
}

// d = (max - min) / 15 and the min itself; q = min(15, trunc((x - min)/d + 0.5)).
void quantize_q4_1(const float* x, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, x += kBlock, out += 20) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (size_t j = 0; j < kBlock; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    put_half(out, d);
    put_half(out + 2, min);
    uint8_t q[kBlock];
    for (size_t j = 0; j < kBlock; ++j) {
      const int v = int8_t((x[j] - min) * id + 0.5f);
      q[j] = uint8_t(v < 15 ? v : 15);
    }
    pack_nibbles(q, out + 4);
  }
}

void quantize_q5_0(const float* x, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, x += kBlock, out += 22) {
    const float d = signed_absmax(x) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    put_half(out, d);
    uint8_t q[kBlock];
    for (size_t j = 0; j < kBlock; ++j) {
      const int v = int8_t(x[j] * id + 16.5f);
      q[j] = uint8_t(v < 31 ? v : 31);
    }
    const uint32_t qh = fifth_bits(q);
    std::memcpy(out + 2, &qh, 4);
    pack_nibbles(q, out + 6);
  }
}

// d = (max - min) / 31 and the min itself; q = trunc((x - min)/d + 0.5).
void quantize_q5_1(const float* x, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, x += kBlock, out += 24) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (size_t j = 0; j < kBlock; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    put_half(out, d);
    put_half(out + 2, min);
    uint8_t q[kBlock];
    for (size_t j = 0; j < kBlock; ++j) q[j] = uint8_t((x[j] - min) * id + 0.5f);
    const uint32_t qh = fifth_bits(q);
    std::memcpy(out + 4, &qh, 4);
    pack_nibbles(q, out + 8);
  }
}

namespace {

// A row's mean square, and the importance weights of one block:
// qw * sqrt(sigma2 + x^2).
float mean_square(const float* x, size_t n) {
  float sum_x2 = 0;
  for (size_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / float(n);
}

void block_weights(const float* x, const float* qw, float sigma2, float* weight) {
  for (size_t j = 0; j < kBlock; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// The symmetric (Q4_0, Q5_0: nmax 8, 16) and offset (Q4_1, Q5_1: nmax 15,
// 31) block searches under importance weights; fp16 d (and min) written to
// `out`, the quants to q.
void symmetric_weighted_block(const float* x, const float* weight, int nmax, uint8_t* out, uint8_t* q) {
  int8_t L[kBlock];
  put_half(out, detail::symmetric_scale_search(int(kBlock), nmax, x, L, weight));
  for (size_t j = 0; j < kBlock; ++j) q[j] = uint8_t(L[j]);
}

void offset_weighted_block(const float* x, const float* weight, int nmax, uint8_t* out, uint8_t* q) {
  uint8_t aux[kBlock];
  float neg_min;
  const float d = detail::offset_scale_search(int(kBlock), nmax, x, weight, q, &neg_min, aux, -0.9f, 0.05f, 36);
  put_half(out, d);
  put_half(out + 2, -neg_min);
}

// Runs `block(x, weights, out, q)` over each block of a row and packs its
// quants: nibbles at `qs_at`, Q5's fifth bits at `qs_at - 4` when `five_bits`.
template <typename Block>
void weighted_row(const float* x, const float* qw, uint8_t* out, size_t n, size_t block_bytes, size_t qs_at,
                  bool five_bits, Block block) {
  const float sigma2 = mean_square(x, n);
  float weight[kBlock];
  uint8_t q[kBlock];
  for (size_t b = 0; b < n / kBlock; ++b, x += kBlock, qw += kBlock, out += block_bytes) {
    block_weights(x, qw, sigma2, weight);
    block(x, weight, out, q);
    if (five_bits) {
      const uint32_t qh = fifth_bits(q);
      std::memcpy(out + qs_at - 4, &qh, 4);
    }
    pack_nibbles(q, out + qs_at);
  }
}

}  // namespace

void quantize_q4_0_weighted(const float* x, const float* qw, uint8_t* out, size_t n) {
  weighted_row(x, qw, out, n, 18, 2, false, [](const float* xb, const float* w, uint8_t* o, uint8_t* q) {
    symmetric_weighted_block(xb, w, 8, o, q);
  });
}

void quantize_q4_1_weighted(const float* x, const float* qw, uint8_t* out, size_t n) {
  weighted_row(x, qw, out, n, 20, 4, false,
               [](const float* xb, const float* w, uint8_t* o, uint8_t* q) { offset_weighted_block(xb, w, 15, o, q); });
}

void quantize_q5_0_weighted(const float* x, const float* qw, uint8_t* out, size_t n) {
  weighted_row(x, qw, out, n, 22, 6, true, [](const float* xb, const float* w, uint8_t* o, uint8_t* q) {
    symmetric_weighted_block(xb, w, 16, o, q);
  });
}

void quantize_q5_1_weighted(const float* x, const float* qw, uint8_t* out, size_t n) {
  weighted_row(x, qw, out, n, 24, 8, true,
               [](const float* xb, const float* w, uint8_t* o, uint8_t* q) { offset_weighted_block(xb, w, 31, o, q); });
}

void dequantize_q4_0(const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, in += 18, y += kBlock) {
    const float d = get_half(in);
    for (size_t j = 0; j < kBlock / 2; ++j) {
      y[j] = float((in[2 + j] & 0x0F) - 8) * d;
      y[j + kBlock / 2] = float((in[2 + j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, in += 20, y += kBlock) {
    const float d = get_half(in), m = get_half(in + 2);
    for (size_t j = 0; j < kBlock / 2; ++j) {
      y[j] = float(in[4 + j] & 0x0F) * d + m;
      y[j + kBlock / 2] = float(in[4 + j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, in += 22, y += kBlock) {
    const float d = get_half(in);
    int q[kBlock];
    unpack_q5(in + 2, in + 6, q);
    for (size_t j = 0; j < kBlock; ++j) y[j] = float(q[j] - 16) * d;
  }
}

void dequantize_q5_1(const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, in += 24, y += kBlock) {
    const float d = get_half(in), m = get_half(in + 2);
    int q[kBlock];
    unpack_q5(in + 4, in + 8, q);
    for (size_t j = 0; j < kBlock; ++j) y[j] = float(q[j]) * d + m;
  }
}

void q4_1_mins(const uint8_t* in, float* mins, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, in += 20) mins[b] = get_half(in + 2);
}

void q5_1_mins(const uint8_t* in, float* mins, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, in += 24) mins[b] = get_half(in + 2);
}

void q8_1_sum_rounding(const float* x, const float* rounded, float* out, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, x += kBlock, rounded += kBlock) {
    float amax = 0, sum = 0;  // sum: a multiple of fp16(d) below 2^12 of them, exact in float
    for (size_t j = 0; j < kBlock; ++j) {
      amax = std::max(amax, std::fabs(x[j]));
      sum += rounded[j];
    }
    const float d = amax / 127.0f, d16 = kernels::fp16_to_fp32(kernels::fp32_to_fp16(d));
    const float quant_sum = d16 != 0 ? sum / d16 : 0.0f;
    out[b] = kernels::fp16_to_fp32(kernels::fp32_to_fp16(d * quant_sum)) - sum;
  }
}

// Q4_0 and Q5_0 weights are d * (q - 8) and d * (q - 16) with an fp16 d:
// exactly a Q8_0 block with the same d and int8 q - 8 (q - 16), so the
// decoder runs them through its Q8_0 kernels (ggml's dot products for these
// types take Q8_0 activations too, and the integer sums are the same).
void q4_0_to_q8_0(const uint8_t* in, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, in += 18, out += 34) {
    std::memcpy(out, in, 2);
    for (size_t j = 0; j < kBlock / 2; ++j) {
      out[2 + j] = uint8_t(int8_t((in[2 + j] & 0x0F) - 8));
      out[2 + j + kBlock / 2] = uint8_t(int8_t((in[2 + j] >> 4) - 8));
    }
  }
}

void q5_0_to_q8_0(const uint8_t* in, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / kBlock; ++b, in += 22, out += 34) {
    std::memcpy(out, in, 2);
    int q[kBlock];
    unpack_q5(in + 2, in + 6, q);
    for (size_t j = 0; j < kBlock; ++j) out[2 + j] = uint8_t(int8_t(q[j] - 16));
  }
}

}  // namespace ggtrain::quant
