#include "kernels/number_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/parallel.h"

namespace ggtrain::kernels {

namespace {

// fp32 -> fp16 -> fp32, round to nearest even (F16C when built with it).
inline float through_half(float v) {
#if defined(__F16C__)
  return _cvtsh_ss(_cvtss_sh(v, 0));
#else
  return fp16_to_fp32(fp32_to_fp16(v));
#endif
}

inline uint16_t to_half(float v) {
#if defined(__F16C__)
  return _cvtss_sh(v, 0);
#else
  return fp32_to_fp16(v);
#endif
}

inline float from_half(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return fp16_to_fp32(h);
#endif
}

float block_absmax(const float* x) {
  float amax = 0.0f;
#pragma omp simd reduction(max : amax)
  for (size_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

}  // namespace

float fp16_to_fp32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return std::bit_cast<float>(sign);
    // subnormal: value = man * 2^-24
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000 | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t fp32_to_fp16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffff;
  if (absx > 0x7f800000) return sign | 0x7e00;  // NaN
  if (absx >= 0x477ff000) return sign | 0x7c00;  // overflow (incl. rounding up) -> inf
  if (absx < 0x38800000) {  // below the smallest normal half
    // Subnormal half: round |f| / 2^-24 to nearest even integer.
    float v = std::bit_cast<float>(absx) * 16777216.0f;  // exact: scaling by a power of two
    float r = std::nearbyint(v);  // default rounding mode is nearest-even
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t exp = (absx >> 23) - 112;
  uint32_t man = absx & 0x7fffff;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;  // carries into exp correctly
  return sign | static_cast<uint16_t>(h);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 64);
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

// Same arithmetic as ggml's quantize_row_q8_0_ref: d = amax/127 stored as
// fp16, q = round(x * (1/d)) with the float32 reciprocal.
void quantize_q8_0(const float* x, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    uint8_t* ob = out + b * kQ8BlockBytes;
    float amax = 0.0f;
    for (size_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t dh = fp32_to_fp16(d);
    std::memcpy(ob, &dh, 2);
    for (size_t j = 0; j < kQ8Block; ++j) {
      int8_t q = static_cast<int8_t>(std::roundf(xb[j] * id));
      std::memcpy(ob + 2 + j, &q, 1);
    }
  }
}

void dequantize_q8_0(const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / kQ8Block; ++b) {
    const uint8_t* ib = in + b * kQ8BlockBytes;
    uint16_t dh;
    std::memcpy(&dh, ib, 2);
    const float d = from_half(dh);
    const auto* q = reinterpret_cast<const int8_t*>(ib + 2);
    float* yb = y + b * kQ8Block;
#pragma omp simd
    for (size_t j = 0; j < kQ8Block; ++j) yb[j] = static_cast<float>(q[j]) * d;
  }
}

void quantize_q8_0_activations(const float* x, uint8_t* out, size_t n) {
  const int64_t blocks = int64_t(n / kQ8Block);
#pragma omp parallel for schedule(static) if (int64_t(n) >= 8 * kMinParallelWork)
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * int64_t(kQ8Block);
    uint8_t* ob = out + b * int64_t(kQ8BlockBytes);
    const float amax = block_absmax(xb);
    const uint16_t dh = to_half(amax / 127.f);
    std::memcpy(ob, &dh, 2);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    auto* q = reinterpret_cast<int8_t*>(ob + 2);
#pragma omp simd
    for (size_t j = 0; j < kQ8Block; ++j) q[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
  }
}

void round_q8_0_activations(const float* x, float* y, size_t n) {
  const int64_t blocks = int64_t(n / kQ8Block);
#pragma omp parallel for schedule(static) if (int64_t(n) >= 8 * kMinParallelWork)
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * int64_t(kQ8Block);
    float* yb = y + b * int64_t(kQ8Block);
    const float amax = block_absmax(xb);
    const float d = through_half(amax / 127.f);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
#pragma omp simd
    for (size_t j = 0; j < kQ8Block; ++j) yb[j] = std::nearbyint(xb[j] * id) * d;
  }
}

}  // namespace ggtrain::kernels
