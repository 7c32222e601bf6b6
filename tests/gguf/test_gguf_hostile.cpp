// Hostile input: a small valid GGUF is assembled byte by byte, then mutated
// one field at a time. Every mutation must end in a ggtrain::Error naming
// the file and the field, never in a crash, a hang or another exception.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gguf/inspect.h"
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
using ggtrain::quant::is_float_convertible;

using ggtrain::test_support::TempDir;

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ------------------------------------------------------------ byte builder

// Little-endian byte sink, independent of the writer under test.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Bytes& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
    return *this;
  }
  Bytes& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
    return *this;
  }
  Bytes& f32(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u32(u);
  }
  Bytes& raw(const std::vector<uint8_t>& r) {
    b.insert(b.end(), r.begin(), r.end());
    return *this;
  }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
};

constexpr uint32_t kU8 = 0, kU32 = 4, kF32 = 6, kBool = 7, kString = 8, kArray = 9, kU64 = 10;

struct Kv {
  Kv(std::string k, uint32_t t, std::vector<uint8_t> v) : key(std::move(k)), type(t), value(std::move(v)) {}
  std::string key;
  uint32_t type;
  std::vector<uint8_t> value;  // the encoded value that follows the type id
  std::optional<uint64_t> key_len;  // default: key.size()
};

struct Tensor {
  Tensor(std::string n, uint32_t dims, std::vector<uint64_t> shape, uint32_t t, uint64_t off)
      : name(std::move(n)), n_dims(dims), ne(std::move(shape)), type(t), offset(off) {}
  std::string name;
  uint32_t n_dims;
  std::vector<uint64_t> ne;  // written as given, even if n_dims disagrees
  uint32_t type;
  uint64_t offset;
  std::optional<uint64_t> name_len;  // default: name.size()
};

// Everything in a GGUF header, field by field, plus the raw data section.
struct Spec {
  uint32_t magic = kMagic;
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors;  // default: tensors.size()
  std::optional<uint64_t> n_kv;  // default: kvs.size()
  std::vector<Kv> kvs;
  std::vector<Tensor> tensors;
  uint64_t pad_to = 32;  // header padding before the data section
  std::vector<uint8_t> data;

  Kv& kv(const std::string& key) {
    for (auto& k : kvs)
      if (k.key == key) return k;
    throw std::logic_error("no key " + key);
  }
  Tensor& tensor(const std::string& name) {
    for (auto& t : tensors)
      if (t.name == name) return t;
    throw std::logic_error("no tensor " + name);
  }

  std::vector<uint8_t> build() const {
    Bytes h;
    h.u32(magic).u32(version).u64(n_tensors.value_or(tensors.size())).u64(n_kv.value_or(kvs.size()));
    for (const auto& k : kvs) {
      h.u64(k.key_len.value_or(k.key.size())).raw({k.key.begin(), k.key.end()});
      h.u32(k.type).raw(k.value);
    }
    for (const auto& t : tensors) {
      h.u64(t.name_len.value_or(t.name.size())).raw({t.name.begin(), t.name.end()});
      h.u32(t.n_dims);
      for (auto d : t.ne) h.u64(d);
      h.u32(t.type).u64(t.offset);
    }
    while (h.b.size() % pad_to) h.u8(0);
    return h.raw(data).b;
  }
};

std::vector<uint8_t> enc_str(const std::string& s) { return Bytes().str(s).b; }
std::vector<uint8_t> enc_u32(uint32_t v) { return Bytes().u32(v).b; }
std::vector<uint8_t> enc_str_array(const std::vector<std::string>& v) {
  Bytes b;
  b.u32(kString).u64(v.size());
  for (const auto& s : v) b.str(s);
  return b.b;
}
// `depth` arrays, each holding the next, the innermost one byte.
std::vector<uint8_t> enc_nested(int depth) {
  Bytes b;
  for (int i = 1; i < depth; ++i) b.u32(kArray).u64(1);
  return b.u32(kU8).u64(1).u8(7).b;
}

// Tensor contents of the valid file.
const std::vector<float> kF32Data{1, 2, 3, 4, 5, 6, 7, 8};
const std::vector<float> kQ8Data = [] {
  std::vector<float> v(32);
  for (int i = 0; i < 32; ++i) v[i] = 0.25f * (i - 16);
  v[31] = 31.75f;  // amax: d = 31.75 / 127 = 0.25 exactly, so Q8_0 is lossless
  return v;
}();
const std::vector<int32_t> kI32Data{10, -20, 30, -40, 50};

// 6 keys (one a string array), then three tensors: t.f32 [4,2] at 0 (32
// bytes), t.q8 Q8_0 [32] at 32 (34 bytes), t.i32 [5] at 96 (20 bytes); the
// data section is 128 bytes, the last 12 of them padding.
Spec valid_spec() {
  Spec s;
  s.kvs = {
      {"general.architecture", kString, enc_str("llama")},
      {"general.name", kString, enc_str("hostile")},
      {"test.count", kU32, enc_u32(7)},
      {"tokenizer.ggml.tokens", kArray, enc_str_array({"a", "bb", "ccc"})},
      {"test.flag", kBool, {1}},
      {"test.scale", kF32, Bytes().f32(0.5f).b},
  };
  s.tensors = {
      {"t.f32", 2, {4, 2}, 0, 0},
      {"t.q8", 1, {32}, 8, 32},
      {"t.i32", 1, {5}, 26, 96},
  };
  s.data.assign(128, 0);
  std::memcpy(s.data.data(), kF32Data.data(), 32);
  quantize_q8_0(kQ8Data.data(), s.data.data() + 32, 32);
  std::memcpy(s.data.data() + 96, kI32Data.data(), 20);
  return s;
}
constexpr uint64_t kTensorDataEnd = 96 + 20;  // end of the last tensor's bytes

void write_valid_with_writer(const std::string& path) {
  GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("general.name", Value::str("hostile"));
  w.set("test.count", Value::u32(7));
  w.set("tokenizer.ggml.tokens", Value::string_array({"a", "bb", "ccc"}));
  w.set("test.flag", Value::boolean(true));
  w.set("test.scale", Value::f32(0.5f));
  quant::add_float_tensor(w, "t.f32", TensorType::F32, {4, 2}, kF32Data.data());
  quant::add_float_tensor(w, "t.q8", TensorType::Q8_0, {32}, kQ8Data.data());
  w.add_tensor_raw("t.i32", TensorType::I32, {5}, kI32Data.data());
  w.write(path);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Parses `bytes` from a file; returns the Error message, or nullopt if it parsed.
std::optional<std::string> parse_error(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_bytes(path, bytes);
  try {
    GgufFile f(path);
    return std::nullopt;
  } catch (const ggtrain::Error& e) {
    return std::string(e.what());
  }
}

// Same tensors (names, types, shapes, offsets, bytes) and metadata.
void expect_same_content(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t i = 0; i < a.metadata().size(); ++i) {
    EXPECT_EQ(a.metadata()[i].first, b.metadata()[i].first);
    EXPECT_TRUE(a.metadata()[i].second == b.metadata()[i].second);
  }
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const auto& x = a.tensors()[i];
    const auto& y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.shape(), y.shape());
    EXPECT_EQ(x.offset, y.offset);
    ASSERT_EQ(x.n_bytes, y.n_bytes);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.n_bytes), 0) << x.name;
  }
}

// ------------------------------------------------------------ tests

TEST(GgufHostile, BuilderMatchesWriterAndParses) {
  TempDir dir;
  write_valid_with_writer(dir.file("writer.gguf"));
  const auto built = valid_spec().build();
  EXPECT_EQ(built, read_bytes(dir.file("writer.gguf"))) << "the hand-assembled file and GgufWriter's disagree";
  write_bytes(dir.file("built.gguf"), built);
  GgufFile f(dir.file("built.gguf"));
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.data_offset() + 128, f.file_size());
  EXPECT_EQ(quant::tensor_floats(f, f.tensor("t.f32")), kF32Data);
  EXPECT_EQ(f.to_i32(f.tensor("t.i32")), kI32Data);
  EXPECT_EQ(quant::tensor_floats(f, f.tensor("t.q8")), kQ8Data);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->items.size(), 3u);
}

struct Mutation {
  std::string name;
  std::function<void(Spec&)> apply;
  std::vector<std::string> words;  // each must appear in the message (case-insensitive)
};

std::vector<Mutation> mutations() {
  const uint64_t huge = 1ull << 62;
  std::vector<Mutation> m{
      {"bad magic", [](Spec& s) { s.magic = 0x46554748; }, {"magic"}},
      {"magic is GGML", [](Spec& s) { s.magic = 0x4c4d4747; }, {"magic"}},
      {"version 1", [](Spec& s) { s.version = 1; }, {"version"}},
      {"version 4", [](Spec& s) { s.version = 4; }, {"version"}},
      {"big-endian version 3", [](Spec& s) { s.version = 0x03000000; }, {"version"}},
      {"huge tensor count", [=](Spec& s) { s.n_tensors = huge; }, {"tensor count"}},
      {"max tensor count", [](Spec& s) { s.n_tensors = ~0ull; }, {"tensor count"}},
      {"tensor count one too many", [](Spec& s) { s.n_tensors = 4; }, {"tensor"}},
      {"huge kv count", [=](Spec& s) { s.n_kv = huge; }, {"metadata count"}},
      {"max kv count", [](Spec& s) { s.n_kv = ~0ull; }, {"metadata count"}},
      {"huge key length", [=](Spec& s) { s.kvs[0].key_len = huge; }, {"metadata key #0", "length"}},
      {"key length one too long", [](Spec& s) { s.kv("test.count").key_len = 11; }, {}},
      {"huge tensor name length", [=](Spec& s) { s.tensors[1].name_len = huge; }, {"tensor #1 name", "length"}},
      {"huge string value length",
       [=](Spec& s) {
         s.kv("general.name").value = Bytes().u64(huge).raw({'h', 'o'}).b;
       },
       {"general.name", "length"}},
      {"string value length one past EOF",
       [](Spec& s) { s.kv("general.name").value = Bytes().u64(100000).raw({'h'}).b; },
       {"general.name", "length"}},
      {"huge array length",
       [=](Spec& s) { s.kv("tokenizer.ggml.tokens").value = Bytes().u32(kString).u64(huge).b; },
       {"tokenizer.ggml.tokens", "array length"}},
      {"huge u64 array length",
       [](Spec& s) { s.kv("tokenizer.ggml.tokens").value = Bytes().u32(kU64).u64(1ull << 61).b; },
       {"tokenizer.ggml.tokens", "array length"}},
      {"huge string length inside array",
       [=](Spec& s) { s.kv("tokenizer.ggml.tokens").value = Bytes().u32(kString).u64(2).str("a").u64(huge).b; },
       {"tokenizer.ggml.tokens", "length"}},
      {"bad value type 13", [](Spec& s) { s.kv("test.count").type = 13; }, {"test.count", "type"}},
      {"bad value type max", [](Spec& s) { s.kv("test.count").type = ~0u; }, {"test.count", "type"}},
      {"bad array element type",
       [](Spec& s) { s.kv("tokenizer.ggml.tokens").value = Bytes().u32(13).u64(0).b; },
       {"tokenizer.ggml.tokens", "element type"}},
      {"bad tensor type 4", [](Spec& s) { s.tensor("t.f32").type = 4; }, {"t.f32", "type"}},
      {"bad tensor type 31", [](Spec& s) { s.tensor("t.f32").type = 31; }, {"t.f32", "type"}},
      {"bad tensor type 200", [](Spec& s) { s.tensor("t.i32").type = 200; }, {"t.i32", "type"}},
      {"n_dims 0",
       [](Spec& s) {
         s.tensor("t.i32").n_dims = 0;
         s.tensor("t.i32").ne.clear();
       },
       {"t.i32", "dimensions"}},
      {"n_dims 5",
       [](Spec& s) {
         s.tensor("t.i32").n_dims = 5;
         s.tensor("t.i32").ne = {5, 1, 1, 1, 1};
       },
       {"t.i32", "dimensions"}},
      {"n_dims max", [](Spec& s) { s.tensor("t.i32").n_dims = ~0u; }, {"t.i32", "dimensions"}},
      {"ne product overflows",
       [](Spec& s) {
         s.tensor("t.f32").ne = {1ull << 32, 1ull << 32};
       },
       {"t.f32", "overflow"}},
      {"ne product overflows over 4 dims",
       [](Spec& s) {
         s.tensor("t.f32").n_dims = 4;
         s.tensor("t.f32").ne = {1ull << 16, 1ull << 16, 1ull << 16, 1ull << 16};
       },
       {"t.f32", "overflow"}},
      {"ne negative as int64", [](Spec& s) { s.tensor("t.i32").ne = {1ull << 63}; }, {"t.i32", "ne[0]"}},
      {"byte count overflows",
       [](Spec& s) {
         s.tensor("t.f32").ne = {1ull << 61, 1};
       },
       {"t.f32", "overflow"}},
      {"Q8_0 ne[0] not a multiple of 32", [](Spec& s) { s.tensor("t.q8").ne = {16}; }, {"t.q8", "block size"}},
      {"tensor offset past the data section",
       [](Spec& s) { s.tensor("t.i32").offset = 1024; },
       {"t.i32", "outside", "data section"}},
      {"tensor offset huge and aligned", [](Spec& s) { s.tensor("t.i32").offset = ~0ull - 31; }, {"t.i32", "outside"}},
      {"tensor runs past the end", [](Spec& s) { s.tensor("t.i32").offset = 128; }, {"t.i32", "outside"}},
      {"huge tensor runs past the end", [](Spec& s) { s.tensor("t.i32").ne = {1ull << 40}; }, {"t.i32", "outside"}},
      {"misaligned offset", [](Spec& s) { s.tensor("t.i32").offset = 100; }, {"t.i32", "offset", "aligned"}},
      {"two tensors at the same offset", [](Spec& s) { s.tensor("t.q8").offset = 0; }, {"overlap"}},
      {"partially overlapping tensors", [](Spec& s) { s.tensor("t.i32").offset = 64; }, {"t.q8", "t.i32", "overlap"}},
      {"duplicate tensor names", [](Spec& s) { s.tensor("t.i32").name = "t.f32"; }, {"duplicate", "t.f32"}},
      {"tensor name 64 bytes", [](Spec& s) { s.tensor("t.i32").name = std::string(64, 'x'); }, {"name"}},
      {"tensor name invalid UTF-8", [](Spec& s) { s.tensor("t.i32").name = "t.\xff"; }, {"tensor #2", "UTF-8"}},
      {"duplicate keys",
       [](Spec& s) { s.kv("general.name").key = "general.architecture"; },
       {"duplicate", "general.architecture"}},
      {"alignment 3",
       [](Spec& s) {
         s.kvs.push_back({"general.alignment", kU32, enc_u32(3)});
       },
       {"alignment"}},
      {"alignment 0",
       [](Spec& s) {
         s.kvs.push_back({"general.alignment", kU32, enc_u32(0)});
       },
       {"alignment"}},
      {"alignment is a string",
       [](Spec& s) {
         s.kvs.push_back({"general.alignment", kString, enc_str("32")});
       },
       {"alignment"}},
      {"alignment is u64",
       [](Spec& s) {
         s.kvs.push_back({"general.alignment", kU64, Bytes().u64(32).b});
       },
       {"alignment"}},
      {"alignment 64 but offsets 32-aligned",
       [](Spec& s) {
         s.kvs.push_back({"general.alignment", kU32, enc_u32(64)});
         s.pad_to = 64;
       },
       {"t.q8", "aligned"}},
      {"alignment 2^31",
       [](Spec& s) {
         s.kvs.push_back({"general.alignment", kU32, enc_u32(1u << 31)});
       },
       {"general.alignment", "1 MiB"}},
      {"alignment 2 MiB (over ggml's cap)",
       [](Spec& s) {
         s.kvs.push_back({"general.alignment", kU32, enc_u32(2u << 20)});
       },
       {"general.alignment", "1 MiB"}},
      {"array of 2^24 + 1 elements (over the cap, whatever the file's size)",
       [](Spec& s) { s.kv("tokenizer.ggml.tokens").value = Bytes().u32(kU8).u64((1ull << 24) + 1).b; },
       {"tokenizer.ggml.tokens", "may hold"}},
      {"string of 64 MiB + 1 (over the cap, whatever the file's size)",
       [](Spec& s) { s.kv("general.name").value = Bytes().u64((64ull << 20) + 1).raw({'h'}).b; },
       {"general.name", "may hold"}},
      {"bool value 2", [](Spec& s) { s.kv("test.flag").value = {2}; }, {"test.flag", "bool"}},
      {"bool value 255 in an array",
       [](Spec& s) {
         s.kv("test.flag") = {"test.flag", kArray, Bytes().u32(kBool).u64(2).u8(1).u8(255).b};
       },
       {"test.flag", "bool"}},
      {"arrays nested 100 deep",
       [](Spec& s) {
         s.kvs.push_back({"test.deep", kArray, enc_nested(100)});
       },
       {"test.deep", "nested"}},
      {"arrays nested 9 deep",
       [](Spec& s) {
         s.kvs.push_back({"test.deep", kArray, enc_nested(9)});
       },
       {"test.deep", "nested"}},
  };
  // Keys that are not UTF-8: a lone continuation byte, a byte never used,
  // a sequence cut short, overlong encodings, a surrogate, and past U+10FFFF.
  const std::vector<std::string> bad_utf8{"a\x80",
                                          "\xff",
                                          "abc\xc3",
                                          "\xe2\x82",
                                          "\xc0\x80",
                                          "\xc1\xbf",
                                          "\xe0\x80\xaf",
                                          "\xf0\x80\x80\xaf",
                                          "\xed\xa0\x80",
                                          "\xf4\x90\x80\x80",
                                          "\xf5\x80\x80\x80",
                                          "\xf8\x88\x80\x80\x80"};
  for (size_t i = 0; i < bad_utf8.size(); ++i)
    m.push_back({"invalid UTF-8 key #" + std::to_string(i),
                 [k = bad_utf8[i]](Spec& s) { s.kv("test.count").key = k; },
                 {"metadata key #2", "UTF-8"}});
  return m;
}

TEST(GgufHostile, EachMutationIsAnErrorNamingFileAndField) {
  TempDir dir;
  const auto valid = valid_spec().build();
  for (const auto& mut : mutations()) {
    SCOPED_TRACE(mut.name);
    Spec s = valid_spec();
    mut.apply(s);
    const auto bytes = s.build();
    ASSERT_NE(bytes, valid) << "mutation changed nothing";
    const std::string path = dir.file("mutated.gguf");
    auto err = parse_error(path, bytes);
    ASSERT_TRUE(err.has_value()) << "parsed without error";
    EXPECT_NE(err->find(path), std::string::npos) << "path missing: " << *err;
    for (const auto& w : mut.words)
      EXPECT_NE(lower(*err).find(lower(w)), std::string::npos) << "'" << w << "' missing: " << *err;
  }
}

TEST(GgufHostile, ValidVariantsStillParse) {
  // The mirror images of some mutations, so the checks above are not simply
  // rejecting everything: version 2, valid UTF-8 keys, 64-byte alignment done
  // right, a legal nesting depth, a 63-byte tensor name.
  TempDir dir;
  const std::vector<std::pair<std::string, std::function<void(Spec&)>>> ok{
      {"version 2", [](Spec& s) { s.version = 2; }},
      {"UTF-8 keys",
       [](Spec& s) {
         s.kv("test.count").key = "caf\xc3\xa9.\xe2\x82\xac.\xf0\x9f\xa6\x99.\xf4\x8f\xbf\xbf.\xef\xbf\xbd";
       }},
      {"alignment 64",
       [](Spec& s) {
         s.kvs.push_back({"general.alignment", kU32, enc_u32(64)});
         s.pad_to = 64;
         s.tensor("t.q8").offset = 64;
         s.tensor("t.i32").offset = 128;
         std::vector<uint8_t> d(192, 0);
         std::copy(s.data.begin(), s.data.begin() + 32, d.begin());
         std::copy(s.data.begin() + 32, s.data.begin() + 66, d.begin() + 64);
         std::copy(s.data.begin() + 96, s.data.begin() + 116, d.begin() + 128);
         s.data = d;
       }},
      {"arrays nested 3 deep",
       [](Spec& s) {
         s.kvs.push_back({"test.deep", kArray, enc_nested(3)});
       }},
      {"tensor name 63 bytes", [](Spec& s) { s.tensor("t.i32").name = std::string(63, 'x'); }},
      {"an array of 2^20 u8 elements (the caps leave real sizes alone)",
       [](Spec& s) {
         s.kvs.push_back({"test.big", kArray, Bytes().u32(kU8).u64(1u << 20).raw(std::vector<uint8_t>(1u << 20, 7)).b});
       }},
      {"tensors out of order", [](Spec& s) { std::swap(s.tensors[0], s.tensors[2]); }},
  };
  for (const auto& [name, apply] : ok) {
    SCOPED_TRACE(name);
    Spec s = valid_spec();
    apply(s);
    auto err = parse_error(dir.file("ok.gguf"), s.build());
    EXPECT_FALSE(err.has_value()) << *err;
    if (!err) {
      GgufFile f(dir.file("ok.gguf"));
      ASSERT_EQ(f.tensors().size(), 3u);
      for (const auto& t : f.tensors()) {
        if (t.type == TensorType::I32) {
          EXPECT_EQ(f.to_i32(t), kI32Data);
        }
      }
    }
  }
}

TEST(GgufHostile, EveryTruncationFailsCleanlyUnlessAllDataRemains) {
  TempDir dir;
  const auto full = valid_spec().build();
  const std::string orig_path = dir.file("full.gguf");
  write_bytes(orig_path, full);
  GgufFile orig(orig_path);
  const uint64_t data_end = orig.data_offset() + kTensorDataEnd;
  ASSERT_LT(data_end, full.size()) << "the valid file should end in padding";
  const std::string path = dir.file("cut.gguf");
  size_t parsed = 0;
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE("length " + std::to_string(len));
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    auto err = parse_error(path, cut);
    if (err) {
      EXPECT_NE(err->find(path), std::string::npos) << *err;
      const std::string l = lower(*err);
      EXPECT_TRUE(l.find("truncated") != std::string::npos || l.find("cannot fit") != std::string::npos ||
                  l.find("bytes are left") != std::string::npos || l.find("outside") != std::string::npos ||
                  l.find("past the end") != std::string::npos)
          << *err;
      continue;
    }
    // Only the trailing padding may be missing from a file that parses.
    ++parsed;
    EXPECT_GE(len, data_end) << "parsed although tensor data is missing";
    GgufFile f(path);
    expect_same_content(orig, f);
  }
  EXPECT_EQ(parsed, full.size() - data_end);
}

// Everything a caller might do with a file that parsed.
void use_everything(const GgufFile& f) {
  (void)inspect_json(f).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  (void)inspect_text(f);
  for (const auto& t : f.tensors()) {
    if (is_float_convertible(t.type)) (void)quant::tensor_floats(f, t);
    if (t.type == TensorType::I32) (void)f.to_i32(t);
    ASSERT_NE(t.data, nullptr);
    ASSERT_LE(t.offset + t.n_bytes + f.data_offset(), f.file_size()) << t.name;
  }
}

TEST(GgufHostile, RandomByteFlipsNeverCrash) {
  TempDir dir;
  const auto valid = valid_spec().build();
  const size_t header = valid.size() - 128;
  const std::string path = dir.file("flipped.gguf");
  ggtrain::Rng rng(20240229);
  int errors = 0, parses = 0;
  for (int it = 0; it < 2000; ++it) {
    std::vector<uint8_t> b = valid;
    const int flips = 1 + static_cast<int>(rng.next_u64() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the header, where every byte means something.
      size_t pos = (rng.next_u64() % 4 != 0) ? rng.next_u64() % header : rng.next_u64() % b.size();
      if (rng.next_u64() % 2) b[pos] ^= static_cast<uint8_t>(1u << (rng.next_u64() % 8));
      else b[pos] = static_cast<uint8_t>(rng.next_u64());
    }
    write_bytes(path, b);
    try {
      GgufFile f(path);
      ++parses;
      use_everything(f);
    } catch (const ggtrain::Error& e) {
      ++errors;
      ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << "iteration " << it << ": " << e.what();
    } catch (const std::exception& e) {
      FAIL() << "iteration " << it << ": exception other than ggtrain::Error: " << e.what();
    }
  }
  EXPECT_GT(errors, 500);
  EXPECT_GT(parses, 100);
}

}  // namespace
