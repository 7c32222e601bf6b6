// Test-only: writes a GGUF with every metadata value type and F32, F16, BF16,
// Q8_0 and I32 tensors of 1 to 4 dimensions, for cross-checks with other
// GGUF readers (tests/node/run_hf_check.sh).
//   make_sample_gguf OUT.gguf [ALIGNMENT]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "quant/gguf_floats.h"
#include "util/error.h"

using namespace ggtrain::gguf;
namespace quant = ggtrain::quant;

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s OUT.gguf [ALIGNMENT]\n", argv[0]);
    return 2;
  }
  try {
    GgufWriter w;
    w.set("general.architecture", Value::str("llama"));
    w.set("general.name", Value::str("ggtrain sample \xe2\x96\x81 \xf0\x9f\xa6\x99"));
    w.set("sample.u8", Value::u8(255));
    w.set("sample.i8", Value::i8(-128));
    w.set("sample.u16", Value::u16(65535));
    w.set("sample.i16", Value::i16(-32768));
    w.set("sample.u32", Value::u32(4294967295u));
    w.set("sample.i32", Value::i32(std::numeric_limits<int32_t>::min()));
    w.set("sample.u64", Value::u64(std::numeric_limits<uint64_t>::max()));
    w.set("sample.i64", Value::i64(std::numeric_limits<int64_t>::min()));
    w.set("sample.f32", Value::f32(0.1f));
    w.set("sample.f32_neg_zero", Value::f32(-0.0f));
    w.set("sample.f64", Value::f64(1.0 / 3.0));
    w.set("sample.f64_tiny", Value::f64(5e-324));
    w.set("sample.bool_true", Value::boolean(true));
    w.set("sample.bool_false", Value::boolean(false));
    w.set("sample.empty_string", Value::str(""));
    w.set("sample.i32_array", Value::i32_array({1, -2, 3}));
    w.set("sample.u64_array", Value::array(ValueType::U64, {Value::u64(0), Value::u64(1ull << 63)}));
    w.set("sample.f32_array", Value::f32_array({0.5f, -1.25f, 3.4028235e38f}));
    w.set("sample.bool_array", Value::array(ValueType::BOOL, {Value::boolean(true), Value::boolean(false)}));
    w.set("sample.empty_array", Value::array(ValueType::U8, {}));
    w.set("tokenizer.ggml.tokens", Value::string_array({"<unk>", "\xc4\xa0the", "", "\xe2\x96\x81"}));
    w.set("sample.nested",
          Value::array(ValueType::ARRAY, {Value::i32_array({1, 2}), Value::string_array({"x", "y"}),
                                          Value::array(ValueType::ARRAY, {Value::f32_array({2.0f})})}));
    if (argc == 3) w.set_alignment(static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10)));

    std::vector<float> f32_1d(7), f16_2d(3 * 5), bf16_3d(2 * 3 * 5), q8_4d(64 * 2 * 1 * 3);
    std::vector<int32_t> i32_2d(5 * 3);
    for (size_t i = 0; i < f32_1d.size(); ++i) f32_1d[i] = 0.5f * static_cast<float>(i) - 1.0f;
    for (size_t i = 0; i < f16_2d.size(); ++i) f16_2d[i] = 0.1f * static_cast<float>(i);
    for (size_t i = 0; i < bf16_3d.size(); ++i) bf16_3d[i] = -3.0f + static_cast<float>(i);
    for (size_t i = 0; i < q8_4d.size(); ++i) q8_4d[i] = static_cast<float>((i * 37) % 101) - 50.0f;
    for (size_t i = 0; i < i32_2d.size(); ++i) i32_2d[i] = static_cast<int32_t>(i * 1000) - 7000;
    quant::add_float_tensor(w, "f32.1d", TensorType::F32, {7}, f32_1d.data());
    quant::add_float_tensor(w, "f16.2d", TensorType::F16, {3, 5}, f16_2d.data());
    quant::add_float_tensor(w, "bf16.3d", TensorType::BF16, {2, 3, 5}, bf16_3d.data());
    quant::add_float_tensor(w, "q8_0.4d", TensorType::Q8_0, {64, 2, 1, 3}, q8_4d.data());
    w.add_tensor_raw("i32.2d", TensorType::I32, {5, 3}, i32_2d.data());
    w.write(argv[1]);
  } catch (const ggtrain::Error& e) {
    std::fprintf(stderr, "make_sample_gguf: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
