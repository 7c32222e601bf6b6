// GgufWriter -> GgufFile: every metadata type, every storage type we write,
// 1-4 dimensional tensors, layout rules, determinism and writer validation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/number_formats.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "support/temp_dir.h"
#include "util/error.h"
#include "util/rng.h"

namespace {

namespace fs = std::filesystem;
using namespace ggtrain::gguf;
namespace quant = ggtrain::quant;
using namespace ggtrain::kernels;

using ggtrain::test_support::TempDir;

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> random_floats(size_t n, uint64_t seed, double scale = 1.0) {
  ggtrain::Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
  return v;
}

uint64_t product(const std::vector<uint64_t>& ne) {
  uint64_t n = 1;
  for (auto d : ne) n *= d;
  return n;
}

// The metadata every round-trip file carries, in order.
std::vector<std::pair<std::string, Value>> all_value_kinds() {
  std::string bytes_with_nul("a\0b", 3);
  return {
      {"t.u8", Value::u8(250)},
      {"t.i8", Value::i8(-128)},
      {"t.u16", Value::u16(65535)},
      {"t.i16", Value::i16(-32768)},
      {"t.u32", Value::u32(4000000000u)},
      {"t.i32", Value::i32(std::numeric_limits<int32_t>::min())},
      {"t.u64", Value::u64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", Value::i64(std::numeric_limits<int64_t>::min())},
      {"t.f32", Value::f32(0.1f)},
      {"t.f32_neg_zero", Value::f32(-0.0f)},
      {"t.f64", Value::f64(1.0 / 3.0)},
      {"t.bool_true", Value::boolean(true)},
      {"t.bool_false", Value::boolean(false)},
      {"t.string", Value::str("llama \xe2\x96\x81 \xf0\x9f\xa6\x99")},  // UTF-8 incl. 4-byte
      {"t.empty_string", Value::str("")},
      {"t.string_with_nul", Value::str(bytes_with_nul)},
      {"t.i32_array", Value::i32_array({1, -2, 3, std::numeric_limits<int32_t>::max()})},
      {"t.u8_array", Value::array(ValueType::U8, {Value::u8(0), Value::u8(255)})},
      {"t.u64_array", Value::array(ValueType::U64, {Value::u64(1), Value::u64(1ull << 63)})},
      {"t.f32_array", Value::f32_array({0.5f, -1.25f, 1e-30f})},
      {"t.bool_array", Value::array(ValueType::BOOL, {Value::boolean(true), Value::boolean(false)})},
      {"t.string_array", Value::string_array({"<unk>", "", "\xc4\xa0the"})},
      {"t.empty_array", Value::array(ValueType::I64, {})},
      {"t.nested", Value::array(ValueType::ARRAY, {Value::i32_array({1, 2}), Value::string_array({"x"}),
                                                   Value::array(ValueType::ARRAY, {Value::f32_array({2.0f})})})},
  };
}

struct TensorSpec {
  std::string name;
  TensorType type;
  std::vector<uint64_t> ne;
};

// One tensor of each stored type, 1 to 4 dimensions, odd sizes so that
// padding between tensors is exercised.
const std::vector<TensorSpec>& tensor_specs() {
  static const std::vector<TensorSpec> specs{
      {"f32.1d", TensorType::F32, {7}},         {"f16.2d", TensorType::F16, {3, 5}},
      {"bf16.3d", TensorType::BF16, {2, 3, 5}}, {"q8_0.4d", TensorType::Q8_0, {64, 2, 1, 3}},
      {"i32.2d", TensorType::I32, {5, 3}},      {"f32.4d", TensorType::F32, {1, 2, 3, 4}},
      {"q8_0.1d", TensorType::Q8_0, {32}},
  };
  return specs;
}

// Writer inputs that stay alive for the whole test.
struct Sample {
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<int32_t>> ints;

  GgufWriter make_writer(uint32_t alignment) {
    GgufWriter w;
    for (auto& [k, v] : all_value_kinds()) w.set(k, v);
    if (alignment != 32) w.set_alignment(alignment);
    floats.assign(tensor_specs().size(), {});
    ints.assign(tensor_specs().size(), {});
    uint64_t seed = 100;
    for (size_t i = 0; i < tensor_specs().size(); ++i) {
      const auto& s = tensor_specs()[i];
      size_t n = product(s.ne);
      if (s.type == TensorType::I32) {
        for (size_t j = 0; j < n; ++j) ints[i].push_back(static_cast<int32_t>(j * 7919) - 50000);
        w.add_tensor_raw(s.name, s.type, s.ne, ints[i].data());
      } else {
        floats[i] = random_floats(n, seed++, s.type == TensorType::BF16 ? 1000.0 : 1.0);
        quant::add_float_tensor(w, s.name, s.type, s.ne, floats[i].data());
      }
    }
    return w;
  }
};

void check_round_trip(uint32_t alignment) {
  TempDir dir;
  Sample sample;
  GgufWriter w = sample.make_writer(alignment);
  EXPECT_EQ(w.tensor_count(), tensor_specs().size());
  const std::string path = dir.file("rt.gguf");
  w.write(path);

  GgufFile f(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);

  // Metadata: same keys in the same order, same types, same values.
  auto want = all_value_kinds();
  if (alignment != 32) want.emplace_back("general.alignment", Value::u32(alignment));
  ASSERT_EQ(f.metadata().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [key, value] = f.metadata()[i];
    SCOPED_TRACE(want[i].first);
    EXPECT_EQ(key, want[i].first);
    EXPECT_EQ(value.type, want[i].second.type) << value_type_name(value.type);
    EXPECT_TRUE(value == want[i].second);
  }
  EXPECT_TRUE(std::signbit(f.find("t.f32_neg_zero")->f));
  EXPECT_EQ(f.get_uint("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.find("t.i64")->i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_string("t.string_with_nul").size(), 3u);
  EXPECT_EQ(f.find("t.nested")->items.at(2).items.at(0).items.at(0).f, 2.0);
  EXPECT_EQ(f.get_bool("t.bool_true"), true);
  EXPECT_EQ(f.get_float("t.f64"), 1.0 / 3.0);
  EXPECT_THROW(f.get_uint("t.string"), ggtrain::Error);
  EXPECT_THROW(f.get_uint("t.i8"), ggtrain::Error);  // negative
  EXPECT_THROW(f.get_string("missing.key"), ggtrain::Error);

  // Layout: aligned data section, aligned tensors in write order, each padded.
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  ASSERT_EQ(f.tensors().size(), tensor_specs().size());
  const auto file = slurp(path);
  ASSERT_EQ(file.size(), f.file_size());
  uint64_t expect_offset = 0;
  for (size_t i = 0; i < tensor_specs().size(); ++i) {
    const auto& s = tensor_specs()[i];
    const TensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(t.name, s.name);
    EXPECT_EQ(t.type, s.type);
    EXPECT_EQ(t.n_dims, s.ne.size());
    EXPECT_EQ(t.shape(), s.ne);
    EXPECT_EQ(t.n_elements, product(s.ne));
    EXPECT_EQ(t.n_bytes, storage_bytes(s.type, product(s.ne)));
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(t.offset, expect_offset);
    expect_offset = (t.offset + t.n_bytes + alignment - 1) / alignment * alignment;
    ASSERT_NE(t.data, nullptr);
    EXPECT_EQ(&f.tensor(s.name), &t);
    // The padding after each tensor is zeros.
    for (uint64_t p = f.data_offset() + t.offset + t.n_bytes; p < f.data_offset() + expect_offset; ++p)
      ASSERT_EQ(file[p], 0) << "padding byte at " << p;

    const size_t n = product(s.ne);
    const uint8_t* stored = file.data() + f.data_offset() + t.offset;
    EXPECT_EQ(std::memcmp(t.data, stored, t.n_bytes), 0) << "mapped view is not the file bytes";
    if (s.type == TensorType::I32) {
      EXPECT_EQ(f.to_i32(t), sample.ints[i]);
      EXPECT_THROW(quant::tensor_floats(f, t), ggtrain::Error);
      continue;
    }
    EXPECT_THROW(f.to_i32(t), ggtrain::Error);
    const auto& x = sample.floats[i];
    std::vector<float> y = quant::tensor_floats(f, t);
    ASSERT_EQ(y.size(), n);
    for (size_t j = 0; j < n; ++j) {
      switch (s.type) {
        case TensorType::F32: ASSERT_EQ(std::memcmp(&y[j], &x[j], 4), 0) << j; break;
        case TensorType::F16:
          ASSERT_EQ(y[j], fp16_to_fp32(fp32_to_fp16(x[j]))) << j;
          ASSERT_LE(std::fabs(y[j] - x[j]), std::fabs(x[j]) * 0x1p-11f + 0x1p-25f) << j;
          break;
        case TensorType::BF16:
          ASSERT_EQ(y[j], bf16_to_fp32(fp32_to_bf16(x[j]))) << j;
          ASSERT_LE(std::fabs(y[j] - x[j]), std::fabs(x[j]) * 0x1p-8f) << j;
          break;
        default: break;
      }
    }
    if (s.type == TensorType::Q8_0) {
      std::vector<uint8_t> q(storage_bytes(s.type, n));
      quantize_q8_0(x.data(), q.data(), n);
      EXPECT_EQ(std::memcmp(stored, q.data(), q.size()), 0);
      for (size_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        for (size_t j = 0; j < 32; ++j)
          ASSERT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), 0.6f * amax / 127) << b * 32 + j;
      }
    }
  }
  // The last tensor is padded too, so the file ends on an alignment boundary.
  EXPECT_EQ(f.file_size(), f.data_offset() + expect_offset);
}

TEST(GgufRoundTrip, EveryValueAndTensorTypeDefaultAlignment) { check_round_trip(32); }
TEST(GgufRoundTrip, EveryValueAndTensorTypeAlignment64) { check_round_trip(64); }
TEST(GgufRoundTrip, EveryValueAndTensorTypeAlignment1) { check_round_trip(1); }

TEST(GgufRoundTrip, SameInputGivesIdenticalBytes) {
  TempDir dir;
  Sample a, b;
  GgufWriter wa = a.make_writer(32);
  wa.write(dir.file("a.gguf"));
  wa.write(dir.file("a2.gguf"));  // the same writer written twice
  b.make_writer(32).write(dir.file("b.gguf"));
  const auto ba = slurp(dir.file("a.gguf"));
  EXPECT_GT(ba.size(), 1000u);
  EXPECT_EQ(ba, slurp(dir.file("a2.gguf")));
  EXPECT_EQ(ba, slurp(dir.file("b.gguf")));
  // Overwriting an existing file replaces it with the same bytes.
  wa.write(dir.file("b.gguf"));
  EXPECT_EQ(ba, slurp(dir.file("b.gguf")));
}

TEST(GgufRoundTrip, HeaderBytesAreLittleEndianGguf3) {
  TempDir dir;
  GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.write(dir.file("h.gguf"));
  const auto b = slurp(dir.file("h.gguf"));
  const std::vector<uint8_t> want{
      'G', 'G', 'U', 'F', 3, 0, 0, 0,  // magic, version 3
      0,   0,   0,   0,   0, 0, 0, 0,  // 0 tensors
      1,   0,   0,   0,   0, 0, 0, 0,  // 1 key
      20,  0,   0,   0,   0, 0, 0, 0,  // key length
  };
  ASSERT_GE(b.size(), want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), b.begin()));
  EXPECT_EQ(std::string(b.begin() + 32, b.begin() + 52), "general.architecture");
  EXPECT_EQ(b.size() % 32, 0u);
  GgufFile f(dir.file("h.gguf"));
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
}

TEST(GgufRoundTrip, SetReplacesAKeyInPlace) {
  TempDir dir;
  GgufWriter w;
  w.set("a", Value::u32(1));
  w.set("b", Value::str("x"));
  w.set("a", Value::f64(2.5));
  w.write(dir.file("s.gguf"));
  GgufFile f(dir.file("s.gguf"));
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[0].first, "a");
  EXPECT_EQ(f.metadata()[0].second.type, ValueType::F64);
  EXPECT_EQ(f.get_float("a"), 2.5);
}

TEST(GgufWriterValidation, RejectsBadTensorsAndAlignment) {
  std::vector<float> x(256, 1.0f);
  GgufWriter w;
  quant::add_float_tensor(w, "a", TensorType::F32, {4}, x.data());
  EXPECT_THROW(quant::add_float_tensor(w, "a", TensorType::F16, {4}, x.data()), ggtrain::Error);
  EXPECT_THROW(w.add_tensor_raw("a", TensorType::I32, {4}, x.data()), ggtrain::Error);
  EXPECT_THROW(quant::add_float_tensor(w, "q", TensorType::Q8_0, {16}, x.data()), ggtrain::Error);
  EXPECT_THROW(quant::add_float_tensor(w, "q", TensorType::Q8_0, {48, 2}, x.data()), ggtrain::Error);
  EXPECT_THROW(quant::add_float_tensor(w, "z", TensorType::F32, {}, x.data()), ggtrain::Error);
  EXPECT_THROW(quant::add_float_tensor(w, "z", TensorType::F32, {1, 1, 1, 1, 1}, x.data()), ggtrain::Error);
  EXPECT_THROW(quant::add_float_tensor(w, "i", TensorType::I32, {4}, x.data()), ggtrain::Error);
  EXPECT_THROW(quant::add_float_tensor(w, std::string(64, 'n'), TensorType::F32, {4}, x.data()), ggtrain::Error);
  quant::add_float_tensor(w, std::string(63, 'n'), TensorType::F32, {4}, x.data());
  quant::add_float_tensor(w, "q", TensorType::Q8_0, {32, 2}, x.data());
  EXPECT_EQ(w.tensor_count(), 3u);

  for (uint32_t bad : {0u, 3u, 48u, 100u, 0xffffffffu}) EXPECT_THROW(w.set_alignment(bad), ggtrain::Error) << bad;
  try {
    quant::add_float_tensor(w, "a", TensorType::F32, {4}, x.data());
    FAIL() << "duplicate accepted";
  } catch (const ggtrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate"), std::string::npos) << e.what();
  }
}

TEST(GgufWriterValidation, MixedArrayFailsAndLeavesNoFile) {
  TempDir dir;
  GgufWriter w;
  w.set("bad", Value::array(ValueType::I32, {Value::i32(1), Value::str("two")}));
  EXPECT_THROW(w.write(dir.file("bad.gguf")), ggtrain::Error);
  EXPECT_TRUE(fs::is_empty(dir.path())) << "partial or temporary file left behind";
}

}  // namespace
