#pragma once
// GGUF v2/v3 reader over a memory map. The input is treated as hostile: every
// count, length, offset and shape is bounds- and overflow-checked before use,
// and every failure is an Error naming the file and the field.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gguf/types.h"
#include "gguf/value.h"
#include "util/mapped_file.h"

namespace ggtrain::gguf {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kDefaultAlignment = 32;
constexpr size_t kMaxDims = 4;
constexpr size_t kMaxTensorName = 63;  // ggml's GGML_MAX_NAME minus the NUL

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  uint32_t n_dims = 0;
  std::array<uint64_t, kMaxDims> ne{1, 1, 1, 1};  // ggml order: ne[0] is contiguous
  uint64_t offset = 0;  // from the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // zero-copy view into the map

  std::vector<uint64_t> shape() const { return {ne.begin(), ne.begin() + n_dims}; }
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return map_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return map_.size(); }

  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  // Typed getters: throw an Error naming the file and key when the key is
  // missing or has an incompatible type.
  uint64_t get_uint(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  uint64_t get_uint_or(const std::string& key, uint64_t fallback) const;
  double get_float_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // throws if absent

  // (A tensor as floats: quant::tensor_floats.)
  // Copy of an I32 tensor.
  std::vector<int32_t> to_i32(const TensorInfo& t) const;

 private:
  void parse();
  MappedFile map_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace ggtrain::gguf
