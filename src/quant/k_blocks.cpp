// The K-quants: super-blocks of 256 weights. Q4_K and Q5_K: 8 sub-blocks of
// 32 with a 6-bit scale and min each (packed in 12 bytes) under fp16 super
// scales d and dmin; Q6_K: 16 sub-blocks of 16 with an int8 scale under an
// fp16 d. ggml's quantize_row_q*_K_ref and dequantize_row_q*_K.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/block_layout.h"
#include "quant/blocks.h"
#include "quant/rounding.h"

namespace ggtrain::quant {

using detail::clamp_to;
using detail::get_half;
using detail::nearest_int;
using detail::put_half;
using detail::scale_min;

namespace {

constexpr size_t QK = kSuperBlock;
constexpr size_t kQ4KBytes = 144, kQ5KBytes = 176, kQ6KBytes = 210;

// A Q4_K/Q5_K block's 12 scale bytes from the 6-bit sub-block scales ls
// and mins lm.
void pack_scales_mins(const uint8_t* ls, const uint8_t* lm, uint8_t* sc) {
  for (size_t j = 0; j < QK / 32; ++j) {
    if (j < 4) {
      sc[j] = ls[j];
      sc[j + 4] = lm[j];
    } else {
      sc[j + 4] = uint8_t((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      sc[j - 4] |= uint8_t((ls[j] >> 4) << 6);
      sc[j] |= uint8_t((lm[j] >> 4) << 6);
    }
  }
}

// Every weight re-quantized against the stored d, dmin and 6-bit scales
// in `head`; a sub-block whose scale is 0 keeps the search's quants, as
// ggml does.
void requantize_offset_superblock(const float* x, int nmax, const uint8_t* head, uint8_t* L) {
  const float d_super = get_half(head), dmin_super = get_half(head + 2);
  for (int j = 0; j < int(QK / 32); ++j) {
    int s, m;
    scale_min(j, head + 4, &s, &m);
    const float d = d_super * float(s);
    if (!d) continue;
    const float dm = dmin_super * float(m);
    for (size_t i = 0; i < 32; ++i) L[32 * j + i] = uint8_t(clamp_to(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per sub-block scale and min
// searches, both quantized to 6 bits under the super-block's fp16 d and
// dmin, then every weight re-quantized against the stored values. Writes
// d, dmin and the 12 scale bytes to `head`; the quants (0..nmax) to L.
void quantize_offset_superblock(const float* x, int nmax, float rmin, int nstep, uint8_t* head, uint8_t* L) {
  float mins[QK / 32], scales[QK / 32], weights[32];
  uint8_t aux[32];
  float max_scale = 0, max_min = 0;
  for (size_t j = 0; j < QK / 32; ++j) {
    float sum_x2 = 0;
    for (size_t l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (size_t l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] =
        detail::offset_scale_search(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], aux, rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[QK / 32], lm[QK / 32];
  for (size_t j = 0; j < QK / 32; ++j) {
    // as ggml: to uint8_t first (a negative scale wraps), then at most 63
    ls[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
  }
  pack_scales_mins(ls, lm, head + 4);
  put_half(head, max_scale / 63.f);
  put_half(head + 2, max_min / 63.f);
  requantize_offset_superblock(x, nmax, head, L);
}

// The same against importance weights qw (quantize_row_q4_K_impl and
// q5_K_impl): each value weighs qw * sqrt(sigma2 + x^2), sigma2 twice the
// block's mean square; the sub-block scales and mins are quantized by a
// search weighted by each sub-block's summed weight.
void quantize_offset_superblock_weighted(const float* x, const float* qw, int nmax, uint8_t* head, uint8_t* L) {
  float mins[QK / 32], scales[QK / 32], sw[QK / 32], weights[32];
  uint8_t aux[32];
  float sum_x2 = 0;
  for (size_t l = 0; l < QK; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = 2 * sum_x2 / float(QK);
  for (size_t j = 0; j < QK / 32; ++j) {
    for (size_t l = 0; l < 32; ++l) weights[l] = qw[32 * j + l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
    float sumw = 0;
    for (size_t l = 0; l < 32; ++l) sumw += weights[l];
    sw[j] = sumw;
    scales[j] = detail::offset_scale_search(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], aux, -0.9f, 0.05f, 36);
  }
  uint8_t ls[QK / 32], lm[QK / 32];
  const float d_block = detail::positive_scale_search(QK / 32, 63, scales, ls, sw);
  const float m_block = detail::positive_scale_search(QK / 32, 63, mins, lm, sw);
  if (nmax == 31) {  // only Q5_K's impl caps them (a negative scale's quant wraps as uint8_t)
    for (size_t j = 0; j < QK / 32; ++j) ls[j] = std::min<uint8_t>(63, ls[j]), lm[j] = std::min<uint8_t>(63, lm[j]);
  }
  pack_scales_mins(ls, lm, head + 4);
  put_half(head, d_block);
  put_half(head + 2, m_block);
  requantize_offset_superblock(x, nmax, head, L);
}

// Per 64 weights: the first 32 in low nibbles, the next 32 in high nibbles.
void pack_low_nibbles(const uint8_t* L, uint8_t* qs) {
  for (size_t j = 0; j < QK; j += 64, qs += 32)
    for (size_t l = 0; l < 32; ++l) qs[l] = uint8_t((L[j + l] & 0xF) | ((L[j + l + 32] & 0xF) << 4));
}

// The weights of an offset super-block: d * scale * q - dmin * min per
// sub-block, quant i of the block given by quant(block, i).
void dequantize_offset_superblock(const uint8_t* block, float* y, int (*quant)(const uint8_t*, int)) {
  const float d = get_half(block), min = get_half(block + 2);
  for (int j = 0; j < int(QK / 32); ++j) {
    int s, m;
    scale_min(j, block + 4, &s, &m);
    const float d1 = d * float(s), m1 = min * float(m);
    for (int l = 0; l < 32; ++l) y[32 * j + l] = d1 * float(quant(block, 32 * j + l)) - m1;
  }
}

// Q5_K's stored quants: the fifth bit of weight j + 64 k (+ 32) is bit 2k
// (2k + 1) of qh[j], the low nibbles as Q4_K's.
void pack_q5_k(const uint8_t* L, uint8_t* out) {
  uint8_t* qh = out + 16;
  std::memset(qh, 0, QK / 8);
  for (size_t j = 0; j < QK; ++j) {
    if (L[j] > 15) qh[j % 32] |= uint8_t(1u << (j / 32));
  }
  pack_low_nibbles(L, out + 48);
}

// One Q6_K super-block: each 16-weight sub-block's symmetric scale search
// (weighted by x^2, or by the importance qw when given), the scales as
// int8 under one fp16 d, then every weight re-quantized against them.
void quantize_q6_k_superblock(const float* x, const float* qw, uint8_t* out) {
  int8_t L[QK];
  float scales[QK / 16];
  uint8_t* ql = out;
  uint8_t* qh = out + 128;
  auto* sc = reinterpret_cast<int8_t*>(out + 192);
  float max_scale = 0, max_abs_scale = 0;
  for (size_t ib = 0; ib < QK / 16; ++ib) {
    scales[ib] = detail::symmetric_scale_search(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + 16 * ib : nullptr);
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) max_abs_scale = abs_scale, max_scale = scales[ib];
  }
  if (max_abs_scale < detail::kGroupMaxEps) {
    std::memset(out, 0, kQ6KBytes);
    return;
  }
  const float iscale = -128.f / max_scale;
  put_half(out + 208, 1 / iscale);
  for (size_t ib = 0; ib < QK / 16; ++ib) {
    const int v = nearest_int(iscale * scales[ib]);
    sc[ib] = int8_t(v < 127 ? v : 127);
  }
  const float d_super = get_half(out + 208);
  for (size_t j = 0; j < QK / 16; ++j) {
    const float d = d_super * sc[j];
    if (!d) continue;
    for (size_t i = 0; i < 16; ++i) L[16 * j + i] = int8_t(clamp_to(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
  }
  // Per 128 weights: low nibbles of (l, l + 64) and (l + 32, l + 96) in ql,
  // the four top bit pairs of l, l + 32, l + 64, l + 96 in qh[l].
  for (size_t j = 0; j < QK; j += 128, ql += 64, qh += 32) {
    for (size_t l = 0; l < 32; ++l) {
      const auto q = [&](size_t k) { return uint8_t(L[j + l + 32 * k]); };
      ql[l] = uint8_t((q(0) & 0xF) | ((q(2) & 0xF) << 4));
      ql[l + 32] = uint8_t((q(1) & 0xF) | ((q(3) & 0xF) << 4));
      qh[l] = uint8_t((q(0) >> 4) | ((q(1) >> 4) << 2) | ((q(2) >> 4) << 4) | ((q(3) >> 4) << 6));
    }
  }
}

}  // namespace

void quantize_q4_k(const float* x, uint8_t* out, size_t n) {
  uint8_t L[QK];
  for (size_t b = 0; b < n / QK; ++b, x += QK, out += kQ4KBytes) {
    quantize_offset_superblock(x, 15, -1.f, 20, out, L);
    pack_low_nibbles(L, out + 16);
  }
}

void quantize_q5_k(const float* x, uint8_t* out, size_t n) {
  uint8_t L[QK];
  for (size_t b = 0; b < n / QK; ++b, x += QK, out += kQ5KBytes) {
    quantize_offset_superblock(x, 31, -0.5f, 15, out, L);
    pack_q5_k(L, out);
  }
}

void quantize_q6_k(const float* x, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / QK; ++b, x += QK, out += kQ6KBytes) quantize_q6_k_superblock(x, nullptr, out);
}

void quantize_q4_k_weighted(const float* x, const float* qw, uint8_t* out, size_t n) {
  uint8_t L[QK];
  for (size_t b = 0; b < n / QK; ++b, x += QK, qw += QK, out += kQ4KBytes) {
    quantize_offset_superblock_weighted(x, qw, 15, out, L);
    pack_low_nibbles(L, out + 16);
  }
}

void quantize_q5_k_weighted(const float* x, const float* qw, uint8_t* out, size_t n) {
  uint8_t L[QK];
  for (size_t b = 0; b < n / QK; ++b, x += QK, qw += QK, out += kQ5KBytes) {
    quantize_offset_superblock_weighted(x, qw, 31, out, L);
    pack_q5_k(L, out);
  }
}

void quantize_q6_k_weighted(const float* x, const float* qw, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / QK; ++b, x += QK, qw += QK, out += kQ6KBytes) quantize_q6_k_superblock(x, qw, out);
}

void dequantize_q4_k(const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / QK; ++b, in += kQ4KBytes, y += QK) dequantize_offset_superblock(in, y, detail::q4_k_quant);
}

void dequantize_q5_k(const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / QK; ++b, in += kQ5KBytes, y += QK) dequantize_offset_superblock(in, y, detail::q5_k_quant);
}

void dequantize_q6_k(const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / QK; ++b, in += kQ6KBytes, y += QK) {
    const float d = get_half(in + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(in + 192);
    for (int i = 0; i < int(QK); ++i) y[i] = d * sc[i / 16] * detail::q6_k_quant(in, i);
  }
}

// Activations as ggml's K-quant dot products take them (quantize_row_q8_K_ref,
// which x86 uses as is): per 256 values d = max / -127 (max the signed
// extreme) as a float, q = min(127, nearest(x / d)); nearbyint is
// nearest_int for these magnitudes. Large inputs use all threads.
void round_q8_k(const float* x, float* y, size_t n) {
  const int64_t blocks = int64_t(n / QK);
#pragma omp parallel for schedule(static) if (n >= (size_t(1) << 18))
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * int64_t(QK);
    float* yb = y + b * int64_t(QK);
    float amax = 0, max = 0;
    for (size_t j = 0; j < QK; ++j)
      if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), max = xb[j];
    if (!amax) {
      for (size_t j = 0; j < QK; ++j) yb[j] = 0;
      continue;
    }
    const float iscale = -127.f / max, d = 1 / iscale;
#pragma omp simd
    for (size_t j = 0; j < QK; ++j) yb[j] = d * std::min(127.f, std::nearbyint(iscale * xb[j]));
  }
}

}  // namespace ggtrain::quant
