#include "gguf/value.h"

namespace ggtrain::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

bool is_valid_value_type(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::F64); }

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64: return 8;
    case ValueType::STRING:
    case ValueType::ARRAY: return 0;
  }
  return 0;
}

Value Value::scalar_u(ValueType t, uint64_t v) {
  Value x;
  x.type = t;
  x.u = v;
  return x;
}

Value Value::scalar_i(ValueType t, int64_t v) {
  Value x;
  x.type = t;
  x.i = v;
  return x;
}

Value Value::f32(float v) {
  Value x;
  x.type = ValueType::F32;
  x.f = v;
  return x;
}

Value Value::f64(double v) {
  Value x;
  x.type = ValueType::F64;
  x.f = v;
  return x;
}

Value Value::str(std::string v) {
  Value x;
  x.type = ValueType::STRING;
  x.s = std::move(v);
  return x;
}

Value Value::array(ValueType elem, std::vector<Value> items) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem_type = elem;
  x.items = std::move(items);
  return x;
}

Value Value::string_array(const std::vector<std::string>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const auto& s : v) items.push_back(str(s));
  return array(ValueType::STRING, std::move(items));
}

Value Value::f32_array(const std::vector<float>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (float f : v) items.push_back(f32(f));
  return array(ValueType::F32, std::move(items));
}

Value Value::i32_array(const std::vector<int32_t>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (int32_t i : v) items.push_back(i32(i));
  return array(ValueType::I32, std::move(items));
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64: return true;
    default: return false;
  }
}

double Value::as_double() const {
  switch (type) {
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64:
    case ValueType::BOOL: return static_cast<double>(u);
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: return static_cast<double>(i);
    case ValueType::F32:
    case ValueType::F64: return f;
    default: return 0;
  }
}

bool operator==(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case ValueType::STRING: return a.s == b.s;
    case ValueType::ARRAY: return a.elem_type == b.elem_type && a.items == b.items;
    case ValueType::F32:
    case ValueType::F64: return a.f == b.f;
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: return a.i == b.i;
    default: return a.u == b.u;
  }
}

}  // namespace ggtrain::gguf
