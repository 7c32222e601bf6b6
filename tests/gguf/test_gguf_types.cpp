// The ggml type table and the element conversions, each checked against an
// independent re-statement of ggml (block structs, IEEE half rounding,
// quantize_row_q8_0_ref) rather than against the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gguf/types.h"
#include "kernels/number_formats.h"
#include "quant/type_traits.h"
#include "util/error.h"
#include "util/rng.h"

namespace {

using namespace ggtrain::gguf;
using namespace ggtrain::kernels;
using ggtrain::quant::decode_floats;
using ggtrain::quant::encode_floats;
using ggtrain::quant::is_float_convertible;

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// ---------------------------------------------------------------- type table

struct ExpectedType {
  const char* name;
  uint32_t block_size;
  uint32_t type_size;
};

// Sizes worked out from ggml-common.h's block_* structs (QK_K = 256), e.g.
// Q3_K = hmask[32] + qs[64] + scales[12] + d(2) = 110 bytes per 256 elements.
const std::map<uint32_t, ExpectedType>& expected_types() {
  static const std::map<uint32_t, ExpectedType> m{
      {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},      {3, {"Q4_1", 32, 20}},
      {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},      {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 36}},
      {10, {"Q2_K", 256, 84}},    {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
      {14, {"Q6_K", 256, 210}},   {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}}, {17, {"IQ2_XS", 256, 74}},
      {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},   {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},
      {22, {"IQ2_S", 256, 82}},   {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
      {26, {"I32", 1, 4}},        {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},        {29, {"IQ1_M", 256, 56}},
      {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},   {35, {"TQ2_0", 256, 66}},   {39, {"MXFP4", 32, 17}},
  };
  return m;
}

TEST(GgufTypes, EveryKnownIdHasGgmlBlockGeometry) {
  for (const auto& [id, want] : expected_types()) {
    SCOPED_TRACE(want.name);
    auto got = type_traits(id);
    ASSERT_TRUE(got.has_value()) << "id " << id;
    EXPECT_EQ(got->name, want.name);
    EXPECT_EQ(got->block_size, want.block_size);
    EXPECT_EQ(got->type_size, want.type_size);
    // The enum, name lookup and traits agree with each other.
    auto t = static_cast<TensorType>(id);
    EXPECT_EQ(type_name(t), want.name);
    EXPECT_EQ(traits(t).type_size, want.type_size);
    ASSERT_TRUE(type_from_name(want.name).has_value());
    EXPECT_EQ(static_cast<uint32_t>(*type_from_name(want.name)), id);
  }
  EXPECT_EQ(static_cast<uint32_t>(TensorType::Q8_0), 8u);
  EXPECT_EQ(static_cast<uint32_t>(TensorType::BF16), 30u);
  EXPECT_EQ(static_cast<uint32_t>(TensorType::I32), 26u);
}

TEST(GgufTypes, RemovedAndUnknownIdsAreRejected) {
  // 4, 5 (Q4_2, Q4_3) and 31..33, 36..38 were removed from ggml; the rest
  // were never assigned. Everything below 40 that isn't in the table is unknown.
  for (uint32_t id = 0; id < 40; ++id) {
    if (expected_types().count(id)) continue;
    EXPECT_FALSE(type_traits(id).has_value()) << "id " << id;
    EXPECT_THROW(traits(static_cast<TensorType>(id)), ggtrain::Error) << "id " << id;
  }
  for (uint32_t id : {200u, 1000u, 0xffffffffu}) EXPECT_FALSE(type_traits(id).has_value());
  try {
    traits(static_cast<TensorType>(31));
    FAIL() << "no error";
  } catch (const ggtrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find("31"), std::string::npos) << e.what();
  }
}

TEST(GgufTypes, NameLookupIsCaseInsensitiveAndStrict) {
  EXPECT_EQ(type_from_name("q8_0"), TensorType::Q8_0);
  EXPECT_EQ(type_from_name("f16"), TensorType::F16);
  EXPECT_EQ(type_from_name("Bf16"), TensorType::BF16);
  EXPECT_FALSE(type_from_name("").has_value());
  EXPECT_FALSE(type_from_name("Q8").has_value());
  EXPECT_FALSE(type_from_name("F32 ").has_value());
  EXPECT_FALSE(type_from_name("Q4_2").has_value());
}

TEST(GgufTypes, StorageBytesFollowsBlocks) {
  EXPECT_EQ(storage_bytes(TensorType::F32, 10), 40u);
  EXPECT_EQ(storage_bytes(TensorType::F16, 10), 20u);
  EXPECT_EQ(storage_bytes(TensorType::BF16, 3), 6u);
  EXPECT_EQ(storage_bytes(TensorType::Q8_0, 96), 3u * 34u);
  EXPECT_EQ(storage_bytes(TensorType::Q4_K, 512), 2u * 144u);
  EXPECT_TRUE(is_float_convertible(TensorType::Q8_0));
  EXPECT_FALSE(is_float_convertible(TensorType::I32));
  EXPECT_TRUE(is_float_convertible(TensorType::Q4_0));
  EXPECT_TRUE(is_float_convertible(TensorType::Q6_K));
  EXPECT_TRUE(is_float_convertible(TensorType::Q4_1));  // llama-quantize's ffn_down with an importance matrix
  EXPECT_FALSE(is_float_convertible(TensorType::IQ4_NL));  // no codec: ggtrain never writes it
  EXPECT_FALSE(is_float_convertible(TensorType::Q2_K));
}

// ---------------------------------------------------------------- fp16

// IEEE binary16 value of a bit pattern, straight from the definition.
double ref_fp16_value(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) v = std::ldexp(m, -24);
  else if (e == 31) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(1024 + m, e - 25);
  return sign ? -v : v;
}

// Round-to-nearest-even float -> half by searching the table of all finite
// non-negative halves (their bit patterns are ordered like their values).
uint16_t ref_fp32_to_fp16(float f) {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (uint32_t h = 0; h <= 0x7bff; ++h) t.push_back(ref_fp16_value(static_cast<uint16_t>(h)));
    return t;
  }();
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7e00;
  double a = std::fabs(static_cast<double>(f));
  // Halfway between 65504 and the next step (65536) rounds to even: infinity.
  if (a >= 65520.0) return sign | 0x7c00;
  size_t lo = std::upper_bound(table.begin(), table.end(), a) - table.begin() - 1;
  if (table[lo] == a || lo == table.size() - 1) return sign | static_cast<uint16_t>(lo);
  double dlo = a - table[lo], dhi = table[lo + 1] - a;  // exact in double
  size_t pick = dlo < dhi ? lo : dhi < dlo ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
  return sign | static_cast<uint16_t>(pick);
}

TEST(GgufFp16, DecodesEveryBitPatternExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float got = fp16_to_fp32(static_cast<uint16_t>(h));
    double want = ref_fp16_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
    }
    ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
  }
}

TEST(GgufFp16, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    uint16_t back = fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h)));
    if (nan) {
      ASSERT_EQ(back & 0x7c00, 0x7c00) << std::hex << h;
      ASSERT_NE(back & 0x3ff, 0) << std::hex << h;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(GgufFp16, HandPickedRoundingCases) {
  // Normal range: 1 + 2^-11 is halfway between 1 (0x3c00, even) and 1 + 2^-10.
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, 0x3c01 is odd
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // just above the tie
  EXPECT_EQ(fp32_to_fp16(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
  // A tie whose rounding carries into the exponent: 2 - 2^-11 -> 2.0.
  EXPECT_EQ(fp32_to_fp16(2.0f - 0x1p-11f), 0x4000);
  EXPECT_EQ(fp32_to_fp16(0.1f), 0x2e66);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);

  // Overflow: 65504 is the largest half; 65520 is the tie with 65536 -> inf.
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-65520.0f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);

  // Subnormal halves (steps of 2^-24).
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(-0x1p-24f), 0x8001);
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // tie with 0 -> 0 (even)
  EXPECT_EQ(fp32_to_fp16(0x1p-25f + 0x1p-40f), 0x0001);  // just above the tie
  EXPECT_EQ(fp32_to_fp16(3 * 0x1p-25f), 0x0002);  // tie 1|2 -> 2
  EXPECT_EQ(fp32_to_fp16(5 * 0x1p-25f), 0x0002);  // tie 2|3 -> 2
  EXPECT_EQ(fp32_to_fp16(1023 * 0x1p-24f), 0x03ff);  // largest subnormal
  EXPECT_EQ(fp32_to_fp16(1023.5f * 0x1p-24f), 0x0400);  // tie -> smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);
  EXPECT_EQ(fp32_to_fp16(0x1p-26f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);

  uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
  uint16_t snan = fp32_to_fp16(from_bits(0xff800001u));  // negative signalling NaN
  EXPECT_EQ(snan & 0xfc00, 0xfc00);
  EXPECT_NE(snan & 0x3ff, 0);
}

TEST(GgufFp16, EveryTieAndItsNeighboursRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    float a = static_cast<float>(ref_fp16_value(static_cast<uint16_t>(h)));
    float b = static_cast<float>(ref_fp16_value(static_cast<uint16_t>(h + 1)));
    float mid = (a + b) / 2;  // exact: halves carry 11 significant bits
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      ASSERT_EQ(fp32_to_fp16(x), ref_fp32_to_fp16(x)) << x;
      ASSERT_EQ(fp32_to_fp16(-x), ref_fp32_to_fp16(-x)) << -x;
    }
    ASSERT_EQ(fp32_to_fp16(mid), (h % 2 == 0) ? h : h + 1) << mid;
  }
}

TEST(GgufFp16, RandomFloatsMatchReferenceRounding) {
  ggtrain::Rng rng(1234);
  for (int i = 0; i < 300000; ++i) {
    float x = from_bits(static_cast<uint32_t>(rng.next_u64()));
    if (i % 2) x = std::ldexp(static_cast<float>(rng.uniform()) * 2 - 1, -30 + int(i % 50));
    if (std::isnan(x)) continue;
    ASSERT_EQ(fp32_to_fp16(x), ref_fp32_to_fp16(x)) << std::hexfloat << x;
  }
}

// ---------------------------------------------------------------- bf16

TEST(GgufBf16, EveryBf16RoundTripsAndDecodesAsTopBits) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bf16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits(f), h << 16);
    uint16_t back = fp32_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_fp32(back))) << std::hex << h;
      ASSERT_NE(back & 0x40, 0) << "NaN must come back quiet: " << std::hex << h;
      ASSERT_EQ(back & 0x8000, h & 0x8000);
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(GgufBf16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);  // tie, 0x3f80 even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, 0x3f81 odd
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);  // above the tie
  EXPECT_EQ(fp32_to_bf16(-(1.0f + 0x1p-8f - 0x1p-23f)), 0xbf80);
  EXPECT_EQ(fp32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  // As in ggml, values past the largest bf16 round up to infinity.
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  // A signalling NaN whose payload lives only in the low bits stays a NaN.
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(fp32_to_bf16(from_bits(0xffc00000u)), 0xffc0);
  // Subnormals are rounded, not flushed.
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00008000u)), 0x0000);
}

// ---------------------------------------------------------------- Q8_0

// ggml's quantize_row_q8_0_ref, re-stated with the reference half rounding.
std::vector<uint8_t> ref_quantize_q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out(x.size() / 32 * 34);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    uint16_t dh = ref_fp32_to_fp16(d);
    out[b * 34] = static_cast<uint8_t>(dh & 0xff);
    out[b * 34 + 1] = static_cast<uint8_t>(dh >> 8);
    for (size_t j = 0; j < 32; ++j)
      out[b * 34 + 2 + j] = static_cast<uint8_t>(static_cast<int8_t>(roundf(x[b * 32 + j] * id)));
  }
  return out;
}

std::vector<float> q8_test_input() {
  ggtrain::Rng rng(7);
  std::vector<float> x;
  // Blocks of different scales, including tiny ones whose d is a subnormal half.
  for (double scale : {1.0, 0.02, 3e-6, 1e-7, 100.0, 5000.0})
    for (int j = 0; j < 64; ++j) x.push_back(static_cast<float>(rng.normal() * scale));
  for (int j = 0; j < 32; ++j) x.push_back(0.0f);  // all zero
  for (int j = 0; j < 32; ++j) x.push_back(j == 5 ? -3.0f : 0.001f);  // negative extreme
  for (int j = 0; j < 32; ++j) x.push_back((j - 16) * 0.5f);  // exact multiples
  for (int j = 0; j < 32; ++j) x.push_back(j % 2 ? 1.0f : -1.0f);  // q = +-127
  // Halfway points of the grid, where ggml's x * (1/d) and a plain x / d can
  // round to different integers.
  const float amax = 0.3f, d = amax / 127;
  x.push_back(amax);
  for (int j = 1; j < 32; ++j) x.push_back((j % 2 ? 1 : -1) * (3 * j + 0.5f) * d);
  return x;
}

TEST(GgufQ8_0, QuantizeMatchesGgmlReferenceBitForBit) {
  std::vector<float> x = q8_test_input();
  ASSERT_EQ(x.size() % 32, 0u);
  std::vector<uint8_t> got(x.size() / 32 * kQ8BlockBytes);
  quantize_q8_0(x.data(), got.data(), x.size());
  std::vector<uint8_t> want = ref_quantize_q8_0(x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "byte " << i << " (block " << i / 34 << ")";

  // encode_floats is the same routine.
  std::vector<uint8_t> enc(got.size());
  encode_floats(TensorType::Q8_0, x.data(), enc.data(), x.size());
  EXPECT_EQ(enc, want);

  // The halfway block really separates x * (1/d) from x / d.
  const float* hw = x.data() + x.size() - 32;
  const float d = hw[0] / 127, id = 1.0f / d;
  int differ = 0;
  for (int j = 0; j < 32; ++j) differ += roundf(hw[j] * id) != roundf(hw[j] / d);
  EXPECT_GT(differ, 0);

  // The +-1 block: d = 1/127 and every q is exactly +-127.
  const uint8_t* last = got.data() + got.size() - 2 * 34;
  for (int j = 0; j < 32; ++j) EXPECT_EQ(static_cast<int8_t>(last[2 + j]), j % 2 ? 127 : -127);
  // The all-zero block is all zero bytes (d = 0).
  const uint8_t* zero = got.data() + (6 * 64 / 32) * 34;
  for (int j = 0; j < 34; ++j) EXPECT_EQ(zero[j], 0);
}

TEST(GgufQ8_0, DequantizeErrorIsWithinHalfAStep) {
  std::vector<float> x = q8_test_input();
  std::vector<uint8_t> q(x.size() / 32 * kQ8BlockBytes);
  quantize_q8_0(x.data(), q.data(), x.size());
  std::vector<float> y(x.size());
  dequantize_q8_0(q.data(), y.data(), x.size());
  std::vector<float> y2(x.size());
  decode_floats(TensorType::Q8_0, q.data(), y2.data(), x.size());
  EXPECT_EQ(y, y2);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const double d = amax / 127.0;
    const double d16 = ref_fp16_value(static_cast<uint16_t>(q[b * 34] | (q[b * 34 + 1] << 8)));
    // Rounding to the integer grid costs at most d/2; storing d as a half
    // moves each of the (at most 127) steps by |d - d16|.
    const double bound = 0.5 * d + 127 * std::fabs(d - d16) + 1e-6 * d;
    for (size_t j = 0; j < 32; ++j) {
      size_t i = b * 32 + j;
      ASSERT_LE(std::fabs(static_cast<double>(x[i]) - y[i]), bound) << "element " << i;
      ASSERT_EQ(y[i], static_cast<float>(static_cast<int8_t>(q[b * 34 + 2 + j])) * static_cast<float>(d16));
    }
  }
}

TEST(GgufQ8_0, EncodeRejectsPartialBlocks) {
  std::vector<float> x(48, 1.0f);
  std::vector<uint8_t> out(100);
  EXPECT_THROW(encode_floats(TensorType::Q8_0, x.data(), out.data(), x.size()), ggtrain::Error);
  EXPECT_THROW(encode_floats(TensorType::I32, x.data(), out.data(), 4), ggtrain::Error);
  EXPECT_THROW(decode_floats(TensorType::IQ4_NL, out.data(), x.data(), 32), ggtrain::Error);
  EXPECT_THROW(encode_floats(TensorType::Q4_K, x.data(), out.data(), x.size()), ggtrain::Error);  // 48 < 256
}

TEST(GgufConvert, EncodeDecodeF16Bf16AreElementwise) {
  std::vector<float> x{0.0f, -0.0f, 1.0f, -2.5f, 0.1f, 65504.0f, 70000.0f, 1e-6f, 3.14159f};
  std::vector<uint8_t> buf(x.size() * 2);
  std::vector<float> y(x.size());
  encode_floats(TensorType::F16, x.data(), buf.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h = static_cast<uint16_t>(buf[2 * i] | (buf[2 * i + 1] << 8));  // little-endian
    EXPECT_EQ(h, ref_fp32_to_fp16(x[i])) << x[i];
  }
  decode_floats(TensorType::F16, buf.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], fp16_to_fp32(fp32_to_fp16(x[i])));

  encode_floats(TensorType::BF16, x.data(), buf.data(), x.size());
  decode_floats(TensorType::BF16, buf.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], bf16_to_fp32(fp32_to_bf16(x[i])));
    EXPECT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) * 0x1p-8f) << x[i];
  }
}

}  // namespace
