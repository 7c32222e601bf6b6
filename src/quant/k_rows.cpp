#include "quant/k_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "kernels/parallel.h"
#include "quant/block_layout.h"
#include "util/error.h"

namespace ggtrain::quant {

using gguf::TensorType;

namespace {

constexpr int64_t QK = 256;

// One K-quant super-block into 256 centred quants and its groups' s and o
// (o = 0 for Q6_K), the products ggml's dequantizer forms.
void unpack_block(TensorType t, const uint8_t* b, int8_t* q, float* s, float* o, int64_t groups) {
  const detail::KBlockFields f = detail::k_block_fields(t, b);
  for (int64_t j = 0; j < groups; ++j) s[j] = f.d * float(f.sc[j]), o[j] = f.dmin * float(f.m[j]);
  const int shift = t == TensorType::Q6_K ? 32 : 0;
  for (int i = 0; i < QK; ++i) q[i] = int8_t(detail::k_stored_quant(t, b, i) - shift);
}

#if defined(__AVX2__) && defined(__FMA__)
// 8 int32 lanes, lane k = sum of w[4k..4k+3] * x[4k..4k+3] (32 int8 pairs).
inline __m256i dot4_i8(const int8_t* w, const int8_t* x) {
  const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i ax = _mm256_sign_epi8(xv, xv);  // |x| as unsigned bytes (x >= -127)
  const __m256i sw = _mm256_sign_epi8(wv, xv);  // w with x's sign
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sw);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sw), _mm256_set1_epi16(1));
#endif
}
#endif

// Row r of w . x: per 32 weights the integer products in vector lanes,
// scaled by their group's s * dx (lanes 0-3 and 4-7 are separate groups of
// 16 for Q6_K) and summed in float; the offsets' part from the group sums.
float row_dot(const KRows& w, int64_t r, const Q8KActivations& x) {
  const int64_t groups = w.cols / w.group, per_block = QK / w.group;
  const int8_t* qr = w.q.data() + r * w.cols;
  const float* s = w.scale.data() + r * groups;
  const float* o = w.offset.data() + r * groups;
  float offsets = 0;
  for (int64_t g = 0; g < groups; ++g) offsets += x.d[size_t(g / per_block)] * o[g] * float(x.group_sum[size_t(g)]);
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < w.cols; i += 32) {
    const float dx = x.d[size_t(i / QK)];
    const int64_t g = i / w.group;
    const float lo = s[g] * dx, hi = (w.group == 16 ? s[g + 1] : s[g]) * dx;
    const __m256 scale = _mm256_set_m128(_mm_set1_ps(hi), _mm_set1_ps(lo));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot4_i8(qr + i, x.q.data() + i)), scale, acc);
  }
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v) - offsets;
#else
  float acc = 0;
  for (int64_t g = 0; g < groups; ++g) {
    int32_t isum = 0;
    for (int64_t i = 0; i < w.group; ++i) isum += int32_t(qr[g * w.group + i]) * int32_t(x.q[size_t(g * w.group + i)]);
    acc += x.d[size_t(g / per_block)] * s[g] * float(isum);
  }
  return acc - offsets;
#endif
}

}  // namespace

KRows KRows::unpack(TensorType t, const uint8_t* data, int64_t rows, int64_t cols) {
  if (t != TensorType::Q4_K && t != TensorType::Q5_K && t != TensorType::Q6_K)
    fail("KRows: {} is not a K-quant", gguf::type_name(t));
  if (cols % QK != 0) fail("KRows: rows of {} are not a multiple of 256", cols);
  KRows k;
  k.rows = rows, k.cols = cols, k.group = t == TensorType::Q6_K ? 16 : 32;
  k.q.resize(size_t(rows * cols));
  k.scale.resize(size_t(rows * cols / k.group));
  k.offset.resize(k.scale.size());
  const int64_t blocks = rows * cols / QK, groups = QK / k.group;
  const size_t block_bytes = gguf::traits(t).type_size;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* src = data + size_t(b) * block_bytes;
    int8_t* q = k.q.data() + b * QK;
    float* s = k.scale.data() + b * groups;
    float* o = k.offset.data() + b * groups;
    unpack_block(t, src, q, s, o, groups);
  }
  return k;
}

void KRows::dequantize(int64_t r0, int64_t r1, float* out) const {
#pragma omp parallel for schedule(static) if ((r1 - r0) * cols >= kernels::kMinParallelWork)
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t* qr = q.data() + r * cols;
    const float* s = scale.data() + r * cols / group;
    const float* o = offset.data() + r * cols / group;
    float* y = out + (r - r0) * cols;
    for (int64_t g = 0; g < cols / group; ++g)
#pragma omp simd
      for (int64_t i = 0; i < group; ++i) y[g * group + i] = s[g] * float(qr[g * group + i]) - o[g];
  }
}

void Q8KActivations::quantize(const float* x, int64_t cols, int64_t group) {
  q.resize(size_t(cols));
  d.resize(size_t(cols / QK));
  group_sum.resize(size_t(cols / group));
  for (int64_t b = 0; b < cols / QK; ++b) {
    const float* xb = x + b * QK;
    float amax = 0, max = 0;
    for (int64_t j = 0; j < QK; ++j)
      if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), max = xb[j];
    int8_t* qb = q.data() + b * QK;
    if (!amax) {
      std::fill(qb, qb + QK, int8_t(0));
      d[size_t(b)] = 0;
      continue;
    }
    const float iscale = -127.f / max;
    d[size_t(b)] = 1 / iscale;
#pragma omp simd
    for (int64_t j = 0; j < QK; ++j) qb[j] = int8_t(std::min(127.f, std::nearbyint(iscale * xb[j])));
  }
  for (int64_t g = 0; g < cols / group; ++g) {
    int32_t s = 0;
    for (int64_t i = 0; i < group; ++i) s += q[size_t(g * group + i)];
    group_sum[size_t(g)] = s;
  }
}

void k_rows_matvec(const KRows& w, const Q8KActivations& x, float* y) {
#pragma omp parallel for schedule(static) if (w.rows * w.cols >= kernels::kMinParallelWork)
  for (int64_t r = 0; r < w.rows; ++r) y[r] = row_dot(w, r, x);
}

}  // namespace ggtrain::quant
