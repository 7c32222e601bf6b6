#include "gguf/inspect.h"

#include <fmt/format.h>

namespace ggtrain::gguf {

namespace {

constexpr size_t kArrayPreview = 8;

std::string scalar_text(const Value& v) {
  switch (v.type) {
    case ValueType::STRING: return nlohmann::json(v.s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    case ValueType::BOOL: return v.u ? "true" : "false";
    case ValueType::F32: return fmt::format("{}", static_cast<float>(v.f));
    case ValueType::F64: return fmt::format("{}", v.f);
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: return fmt::format("{}", v.i);
    default: return fmt::format("{}", v.u);
  }
}

std::string value_text(const Value& v) {
  if (v.type != ValueType::ARRAY) return scalar_text(v);
  std::string s = fmt::format("[{}; {}]", value_type_name(v.elem_type), v.items.size());
  if (v.items.empty()) return s;
  s += " ";
  for (size_t i = 0; i < v.items.size() && i < kArrayPreview; ++i) s += (i ? ", " : "") + value_text(v.items[i]);
  if (v.items.size() > kArrayPreview) s += ", ...";
  return s;
}

std::string shape_text(const TensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

}  // namespace

nlohmann::json value_to_json(const Value& v) {
  switch (v.type) {
    case ValueType::STRING: return v.s;
    case ValueType::BOOL: return v.u != 0;
    case ValueType::F32: return static_cast<double>(static_cast<float>(v.f));
    case ValueType::F64: return v.f;
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: return v.i;
    case ValueType::ARRAY: {
      auto a = nlohmann::json::array();
      for (const auto& item : v.items) a.push_back(value_to_json(item));
      return a;
    }
    default: return v.u;
  }
}

nlohmann::json inspect_json(const GgufFile& f) {
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : f.metadata()) meta[k] = value_to_json(v);
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : f.tensors()) {
    tensors.push_back(
        {{"name", t.name}, {"type", std::string(type_name(t.type))}, {"shape", t.shape()}, {"offset", t.offset}});
  }
  return {{"metadata", meta}, {"tensors", tensors}};
}

std::string inspect_text(const GgufFile& f) {
  std::string out = fmt::format("file: {}\nGGUF version {}, alignment {}, data at offset {}\n", f.path(), f.version(),
                                f.alignment(), f.data_offset());
  out += fmt::format("\nmetadata ({} keys):\n", f.metadata().size());
  for (const auto& [k, v] : f.metadata())
    out += fmt::format("  {:<40} {:<6} {}\n", k, value_type_name(v.type), value_text(v));
  out += fmt::format("\ntensors ({}):\n", f.tensors().size());
  out += fmt::format("  {:<36} {:<7} {:<22} {:>12} {:>12}\n", "name", "type", "shape (ne)", "offset", "bytes");
  uint64_t params = 0, bytes = 0;
  for (const auto& t : f.tensors()) {
    out += fmt::format("  {:<36} {:<7} {:<22} {:>12} {:>12}\n", t.name, type_name(t.type), shape_text(t), t.offset,
                       t.n_bytes);
    params += t.n_elements;
    bytes += t.n_bytes;
  }
  out += fmt::format("\ntotals: {} parameters in {} tensors, {} bytes of tensor data, file {} bytes\n", params,
                     f.tensors().size(), bytes, f.file_size());
  return out;
}

}  // namespace ggtrain::gguf
