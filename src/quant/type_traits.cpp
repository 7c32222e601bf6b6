#include "quant/type_traits.h"

#include <array>
#include <cstring>

#include "kernels/number_formats.h"
#include "quant/blocks.h"
#include "util/error.h"

namespace ggtrain::quant {

using gguf::TensorType;

namespace {

void f32_to_float(const uint8_t* in, float* y, size_t n) { std::memcpy(y, in, n * 4); }
void float_to_f32(const float* x, uint8_t* out, size_t n) { std::memcpy(out, x, n * 4); }

template <float (*Decode)(uint16_t)>
void halves_to_float(const uint8_t* in, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    y[i] = Decode(h);
  }
}

template <uint16_t (*Encode)(float)>
void float_to_halves(const float* x, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = Encode(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

// ggml's F16 and BF16 dot products take the activations in that format.
template <uint16_t (*Encode)(float), float (*Decode)(uint16_t)>
void round_through(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Decode(Encode(x[i]));
}

constexpr auto kF16ToFloat = halves_to_float<kernels::fp16_to_fp32>;
constexpr auto kBf16ToFloat = halves_to_float<kernels::bf16_to_fp32>;
constexpr auto kFloatToF16 = float_to_halves<kernels::fp32_to_fp16>;
constexpr auto kFloatToBf16 = float_to_halves<kernels::fp32_to_bf16>;
constexpr auto kRoundF16 = round_through<kernels::fp32_to_fp16, kernels::fp16_to_fp32>;
constexpr auto kRoundBf16 = round_through<kernels::fp32_to_bf16, kernels::bf16_to_fp32>;

using enum DecodeForm;
// Activations: Q8_0 rounding for the 32-blocks (Q5_1's Q8_1 rounds the same
// way and adds its block sums: q8_1_sum_rounding), Q8_K for the K-quants.
constexpr std::array<TypeCodec, 11> kCodecs{{
    {.type = TensorType::F32,
     .block_size = 1,
     .to_float = f32_to_float,
     .from_float = float_to_f32,
     .round_activations = nullptr,
     .held_base = false,
     .decode = kFloat},
    {.type = TensorType::F16,
     .block_size = 1,
     .to_float = kF16ToFloat,
     .from_float = kFloatToF16,
     .round_activations = kRoundF16,
     .held_base = false,
     .decode = kWidened},
    {.type = TensorType::Q4_0,
     .block_size = 32,
     .to_float = dequantize_q4_0,
     .from_float = quantize_q4_0,
     .round_activations = kernels::round_q8_0_activations,
     .held_base = true,
     .decode = kAsQ8_0,
     .to_q8_0 = q4_0_to_q8_0,
     .from_float_weighted = quantize_q4_0_weighted},
    {.type = TensorType::Q4_1,
     .block_size = 32,
     .to_float = dequantize_q4_1,
     .from_float = quantize_q4_1,
     .round_activations = kernels::round_q8_0_activations,
     .held_base = true,
     .decode = kWidened,
     .from_float_weighted = quantize_q4_1_weighted,
     .block_mins = q4_1_mins},
    {.type = TensorType::Q5_0,
     .block_size = 32,
     .to_float = dequantize_q5_0,
     .from_float = quantize_q5_0,
     .round_activations = kernels::round_q8_0_activations,
     .held_base = true,
     .decode = kAsQ8_0,
     .to_q8_0 = q5_0_to_q8_0,
     .from_float_weighted = quantize_q5_0_weighted},
    {.type = TensorType::Q5_1,
     .block_size = 32,
     .to_float = dequantize_q5_1,
     .from_float = quantize_q5_1,
     .round_activations = kernels::round_q8_0_activations,
     .held_base = true,
     .decode = kWidened,
     .from_float_weighted = quantize_q5_1_weighted,
     .block_mins = q5_1_mins},
    {.type = TensorType::Q8_0,
     .block_size = 32,
     .to_float = kernels::dequantize_q8_0,
     .from_float = kernels::quantize_q8_0,
     .round_activations = kernels::round_q8_0_activations,
     .held_base = true,
     .decode = kQ8_0},
    {.type = TensorType::Q4_K,
     .block_size = 256,
     .to_float = dequantize_q4_k,
     .from_float = quantize_q4_k,
     .round_activations = round_q8_k,
     .held_base = true,
     .decode = kKRows,
     .small_row_fallback = TensorType::Q5_0,
     .from_float_weighted = quantize_q4_k_weighted},
    {.type = TensorType::Q5_K,
     .block_size = 256,
     .to_float = dequantize_q5_k,
     .from_float = quantize_q5_k,
     .round_activations = round_q8_k,
     .held_base = true,
     .decode = kKRows,
     .small_row_fallback = TensorType::Q5_1,
     .from_float_weighted = quantize_q5_k_weighted},
    {.type = TensorType::Q6_K,
     .block_size = 256,
     .to_float = dequantize_q6_k,
     .from_float = quantize_q6_k,
     .round_activations = round_q8_k,
     .held_base = true,
     .decode = kKRows,
     .small_row_fallback = TensorType::Q8_0,
     .from_float_weighted = quantize_q6_k_weighted},
    {.type = TensorType::BF16,
     .block_size = 1,
     .to_float = kBf16ToFloat,
     .from_float = kFloatToBf16,
     .round_activations = kRoundBf16,
     .held_base = false,
     .decode = kWidened},
}};

// Every row is a type gguf/types.h knows, once, with ggml's block size, in
// the order of ggml's type ids, and falls back to a row with smaller blocks.
// (That each row has the functions its form needs is a unit test: GCC does
// not treat a function's address as a constant under the sanitizers.)
constexpr bool rows_agree_with_the_enum() {
  uint32_t last_id = 0;
  for (size_t i = 0; i < kCodecs.size(); ++i) {
    const TypeCodec& c = kCodecs[i];
    const auto id = static_cast<uint32_t>(c.type);
    const auto size = gguf::type_traits(id);
    if (!size || size->block_size != c.block_size) return false;
    if (i > 0 && id <= last_id) return false;
    last_id = id;
    if (c.small_row_fallback != c.type) {
      bool found = false;
      for (const TypeCodec& f : kCodecs)
        if (f.type == c.small_row_fallback) found = f.block_size < c.block_size;
      if (!found) return false;
    }
  }
  return true;
}
static_assert(rows_agree_with_the_enum());
static_assert(kernels::kQ8Block == 32 && kSuperBlock == 256);

}  // namespace

std::span<const TypeCodec> all_codecs() { return kCodecs; }

const TypeCodec* find_codec(TensorType t) {
  for (const auto& c : kCodecs)
    if (c.type == t) return &c;
  return nullptr;
}

std::string codec_type_names() {
  std::string s;
  for (const auto& c : kCodecs) s += (s.empty() ? "" : ", ") + std::string(gguf::type_name(c.type));
  return s;
}

const TypeCodec& codec(TensorType t, std::string_view what) {
  const TypeCodec* c = find_codec(t);
  if (!c) fail("cannot {} {} ({} can)", what, gguf::type_name(t), codec_type_names());
  return *c;
}

bool is_float_convertible(TensorType t) { return find_codec(t) != nullptr; }

void encode_floats(TensorType t, const float* x, uint8_t* out, size_t n) {
  const TypeCodec& c = codec(t, "encode floats as");
  if (n % c.block_size != 0) fail("{} needs a multiple of {} elements, got {}", gguf::type_name(t), c.block_size, n);
  c.from_float(x, out, n);
}

void decode_floats(TensorType t, const uint8_t* in, float* y, size_t n) {
  const TypeCodec& c = codec(t, "convert to float");
  if (n % c.block_size != 0) fail("{} needs a multiple of {} elements, got {}", gguf::type_name(t), c.block_size, n);
  c.to_float(in, y, n);
}

void round_activations_for(TensorType t, const float* x, float* y, size_t n) {
  const TypeCodec& c = codec(t, "round activations for");
  if (c.round_activations) c.round_activations(x, y, n);
  else if (y != x) std::memcpy(y, x, n * sizeof(float));
}

}  // namespace ggtrain::quant
