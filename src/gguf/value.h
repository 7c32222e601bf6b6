#pragma once
// A GGUF metadata value: any scalar type, a string, or a (possibly nested)
// array. The exact on-disk type is kept so files round-trip byte for byte.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

std::string_view value_type_name(ValueType t);
bool is_valid_value_type(uint32_t id);
// Bytes of a scalar on disk; 0 for STRING and ARRAY.
size_t scalar_size(ValueType t);

struct Value {
  ValueType type = ValueType::U32;
  uint64_t u = 0;  // U8..U64, BOOL
  int64_t i = 0;  // I8..I64
  double f = 0;  // F32, F64
  std::string s;  // STRING
  ValueType elem_type = ValueType::U8;  // ARRAY
  std::vector<Value> items;  // ARRAY

  static Value u8(uint8_t v) { return scalar_u(ValueType::U8, v); }
  static Value u16(uint16_t v) { return scalar_u(ValueType::U16, v); }
  static Value u32(uint32_t v) { return scalar_u(ValueType::U32, v); }
  static Value u64(uint64_t v) { return scalar_u(ValueType::U64, v); }
  static Value i8(int8_t v) { return scalar_i(ValueType::I8, v); }
  static Value i16(int16_t v) { return scalar_i(ValueType::I16, v); }
  static Value i32(int32_t v) { return scalar_i(ValueType::I32, v); }
  static Value i64(int64_t v) { return scalar_i(ValueType::I64, v); }
  static Value f32(float v);
  static Value f64(double v);
  static Value boolean(bool v) { return scalar_u(ValueType::BOOL, v ? 1 : 0); }
  static Value str(std::string v);
  static Value array(ValueType elem, std::vector<Value> items);
  static Value string_array(const std::vector<std::string>& v);
  static Value f32_array(const std::vector<float>& v);
  static Value i32_array(const std::vector<int32_t>& v);

  bool is_integer() const;
  bool is_float() const { return type == ValueType::F32 || type == ValueType::F64; }
  // Numeric value as double (integers, floats, bool).
  double as_double() const;

 private:
  static Value scalar_u(ValueType t, uint64_t v);
  static Value scalar_i(ValueType t, int64_t v);
};

bool operator==(const Value& a, const Value& b);

}  // namespace ggtrain::gguf
