#include "gguf/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "util/error.h"
#include "util/utf8.h"

namespace ggtrain::gguf {

namespace {

constexpr int kMaxArrayDepth = 8;
// Caps on what one metadata value may claim, checked before anything is
// allocated. A count is also checked against the bytes left in the file,
// but a multi-GB model file leaves room for claims that would cost far more
// memory than the bytes they read: each array element becomes a Value of
// ~100 bytes. Real vocabularies have at most ~262k tokens (Gemma 3) and
// chat templates a few KiB; ggml caps alignment at 1 MiB.
constexpr uint64_t kMaxArrayElements = uint64_t(1) << 24;
constexpr uint64_t kMaxStringBytes = uint64_t(64) << 20;
constexpr uint64_t kMaxAlignment = uint64_t(1) << 20;

// Bounds-checked little-endian cursor. `what` names the field being read so
// that a truncated or corrupt file gives an error a user can act on.
class Cursor {
 public:
  Cursor(const MappedFile& f) : path_(f.path()), p_(f.data()), size_(f.size()) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  void need(size_t n, const std::string& what) const {
    if (n > left())
      fail("{}: truncated file: {} needs {} bytes at offset {}, only {} left", path_, what, n, pos_, left());
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    uint64_t len = read<uint64_t>(what + " length");
    if (len > kMaxStringBytes)
      fail("{}: {} has length {} at offset {}: more than the {} MiB a GGUF string may hold here", path_, what, len,
           pos_ - 8, kMaxStringBytes >> 20);
    if (len > left())
      fail("{}: {} has length {} at offset {}, but only {} bytes are left", path_, what, len, pos_ - 8, left());
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  const std::string& path() const { return path_; }

 private:
  const std::string& path_;
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
};

// Smallest number of bytes one element of this type occupies on disk; used to
// reject counts that could not possibly fit before allocating anything.
size_t min_element_bytes(ValueType t) {
  if (t == ValueType::STRING) return 8;
  if (t == ValueType::ARRAY) return 12;
  return scalar_size(t);
}

Value read_value(Cursor& c, ValueType type, const std::string& what, int depth);

Value read_array(Cursor& c, const std::string& what, int depth) {
  if (depth >= kMaxArrayDepth) fail("{}: {}: arrays nested deeper than {}", c.path(), what, kMaxArrayDepth);
  uint32_t et = c.read<uint32_t>(what + " element type");
  if (!is_valid_value_type(et)) fail("{}: {}: invalid array element type {}", c.path(), what, et);
  auto elem = static_cast<ValueType>(et);
  uint64_t n = c.read<uint64_t>(what + " array length");
  if (n > kMaxArrayElements)
    fail("{}: {}: array length {} is more than the {} elements a GGUF array may hold here", c.path(), what, n,
         kMaxArrayElements);
  if (n > c.left() / min_element_bytes(elem))
    fail("{}: {}: array length {} cannot fit in the {} bytes left", c.path(), what, n, c.left());
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(std::min<uint64_t>(n, 4096)));  // grows with what is really read
  for (uint64_t i = 0; i < n; ++i) items.push_back(read_value(c, elem, what, depth + 1));
  return Value::array(elem, std::move(items));
}

Value read_value(Cursor& c, ValueType type, const std::string& what, int depth) {
  switch (type) {
    case ValueType::U8: return Value::u8(c.read<uint8_t>(what));
    case ValueType::I8: return Value::i8(c.read<int8_t>(what));
    case ValueType::U16: return Value::u16(c.read<uint16_t>(what));
    case ValueType::I16: return Value::i16(c.read<int16_t>(what));
    case ValueType::U32: return Value::u32(c.read<uint32_t>(what));
    case ValueType::I32: return Value::i32(c.read<int32_t>(what));
    case ValueType::U64: return Value::u64(c.read<uint64_t>(what));
    case ValueType::I64: return Value::i64(c.read<int64_t>(what));
    case ValueType::F32: return Value::f32(c.read<float>(what));
    case ValueType::F64: return Value::f64(c.read<double>(what));
    case ValueType::BOOL: {
      uint8_t b = c.read<uint8_t>(what);
      if (b > 1) fail("{}: {}: bool value {} is neither 0 nor 1", c.path(), what, b);
      return Value::boolean(b != 0);
    }
    case ValueType::STRING: return Value::str(c.read_string(what));
    case ValueType::ARRAY: return read_array(c, what, depth);
  }
  fail("{}: {}: invalid value type {}", c.path(), what, static_cast<uint32_t>(type));
}

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& path, const std::string& what) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) fail("{}: {}: element count overflows", path, what);
  return a * b;
}

using Metadata = std::vector<std::pair<std::string, Value>>;

// The key/value section: UTF-8 keys, each once, values of valid types.
Metadata read_metadata(Cursor& c, uint64_t n_kv) {
  const std::string& path = c.path();
  Metadata kv;
  std::unordered_set<std::string> keys;
  kv.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string(fmt::format("metadata key #{}", i));
    if (!valid_utf8(key)) fail("{}: metadata key #{} is not valid UTF-8", path, i);
    if (!keys.insert(key).second) fail("{}: duplicate metadata key '{}'", path, key);
    uint32_t t = c.read<uint32_t>("type of '" + key + "'");
    if (!is_valid_value_type(t)) fail("{}: metadata '{}' has invalid type {}", path, key, t);
    kv.emplace_back(key, read_value(c, static_cast<ValueType>(t), "metadata '" + key + "'", 0));
  }
  return kv;
}

// general.alignment: a u32 power of two, or the default.
uint64_t alignment_of(const Metadata& kv, const std::string& path) {
  for (const auto& [key, a] : kv) {
    if (key != "general.alignment") continue;
    if (a.type != ValueType::U32) fail("{}: general.alignment must be u32, is {}", path, value_type_name(a.type));
    if (a.u == 0 || (a.u & (a.u - 1)) != 0) fail("{}: general.alignment {} is not a power of two", path, a.u);
    if (a.u > kMaxAlignment) fail("{}: general.alignment {} is more than ggml's limit of 1 MiB", path, a.u);
    return a.u;
  }
  return kDefaultAlignment;
}

// Tensor info #i: a unique UTF-8 name, 1..kMaxDims dimensions whose element
// count does not overflow, a known type whose blocks divide ne[0], an
// aligned offset. Where its data lies is checked by place_tensor_data.
TensorInfo read_tensor_info(Cursor& c, uint64_t i, uint64_t alignment, std::unordered_set<std::string>& names) {
  const std::string& path = c.path();
  TensorInfo t;
  t.name = c.read_string(fmt::format("tensor #{} name", i));
  const std::string what = fmt::format("tensor '{}'", t.name);
  if (t.name.size() > kMaxTensorName)
    fail("{}: tensor #{} name is {} bytes (max {})", path, i, t.name.size(), kMaxTensorName);
  if (!valid_utf8(t.name)) fail("{}: tensor #{} name is not valid UTF-8", path, i);
  if (!names.insert(t.name).second) fail("{}: duplicate tensor name '{}'", path, t.name);
  t.n_dims = c.read<uint32_t>(what + " n_dims");
  if (t.n_dims == 0 || t.n_dims > kMaxDims)
    fail("{}: {} has {} dimensions (1..{} allowed)", path, what, t.n_dims, kMaxDims);
  t.n_elements = 1;
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    t.ne[d] = c.read<uint64_t>(fmt::format("{} ne[{}]", what, d));
    if (t.ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{}: {} ne[{}] = {} is negative", path, what, d, t.ne[d]);
    t.n_elements = checked_mul(t.n_elements, t.ne[d], path, what);
  }
  uint32_t type_id = c.read<uint32_t>(what + " type");
  auto tr = type_traits(type_id);
  if (!tr) fail("{}: {} has unknown ggml type id {}", path, what, type_id);
  t.type = static_cast<TensorType>(type_id);
  if (t.ne[0] % tr->block_size != 0)
    fail("{}: {} ne[0] = {} is not a multiple of the {} block size {}", path, what, t.ne[0], tr->name, tr->block_size);
  t.n_bytes = checked_mul(t.n_elements / tr->block_size, tr->type_size, path, what);
  t.offset = c.read<uint64_t>(what + " offset");
  if (t.offset % alignment != 0) fail("{}: {} offset {} is not aligned to {}", path, what, t.offset, alignment);
  return t;
}

// Points every tensor at its data: inside the data section, no two
// overlapping (a writer bug or a crafted file).
void place_tensor_data(std::vector<TensorInfo>& tensors, const MappedFile& map, uint64_t data_offset) {
  const std::string& path = map.path();
  if (!tensors.empty() && data_offset > map.size())
    fail("{}: data section would start at {}, past the end of the file ({} bytes)", path, data_offset, map.size());
  const uint64_t data_size = data_offset <= map.size() ? map.size() - data_offset : 0;
  for (auto& t : tensors) {
    // Past the end of the file: most often a file cut short, which is worth saying.
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      fail("{}: tensor '{}' data [{}, +{}) lies outside the {}-byte data section: the file ends before it "
           "(truncated by an interrupted copy or download? copy it again)",
           path, t.name, t.offset, t.n_bytes, data_size);
    t.data = map.data() + data_offset + t.offset;
  }
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    if (prev->n_bytes > 0 && prev->offset + prev->n_bytes > by_offset[i]->offset)
      fail("{}: tensors '{}' and '{}' overlap", path, prev->name, by_offset[i]->name);
  }
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : map_(path) { parse(); }

// Header, metadata, tensor infos, then where each tensor's data lies; every
// count and size checked against the file before anything is allocated.
void GgufFile::parse() {
  Cursor c(map_);
  const std::string& path = map_.path();
  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) fail("{}: not a GGUF file (magic 0x{:08x})", path, magic);
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) fail("{}: unsupported GGUF version {} (supported: 2, 3)", path, version_);
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key/value takes at least 13 bytes and a tensor info at least 28.
  if (n_kv > c.left() / 13) fail("{}: metadata count {} cannot fit in the file ({} bytes)", path, n_kv, map_.size());
  if (n_tensors > c.left() / 28)
    fail("{}: tensor count {} cannot fit in the file ({} bytes)", path, n_tensors, map_.size());
  kv_ = read_metadata(c, n_kv);
  alignment_ = alignment_of(kv_, path);
  std::unordered_set<std::string> names;
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) tensors_.push_back(read_tensor_info(c, i, alignment_, names));
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  place_tensor_data(tensors_, map_, data_offset_);
}

const Value* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

uint64_t GgufFile::get_uint(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail("{}: missing metadata key '{}'", path(), key);
  if (v->is_integer()) {
    if (v->type == ValueType::I8 || v->type == ValueType::I16 || v->type == ValueType::I32 ||
        v->type == ValueType::I64) {
      if (v->i < 0) fail("{}: metadata '{}' is negative ({})", path(), key, v->i);
      return static_cast<uint64_t>(v->i);
    }
    return v->u;
  }
  fail("{}: metadata '{}' must be an integer, is {}", path(), key, value_type_name(v->type));
}

double GgufFile::get_float(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail("{}: missing metadata key '{}'", path(), key);
  if (v->is_float() || v->is_integer()) return v->as_double();
  fail("{}: metadata '{}' must be a number, is {}", path(), key, value_type_name(v->type));
}

bool GgufFile::get_bool(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail("{}: missing metadata key '{}'", path(), key);
  if (v->type != ValueType::BOOL) fail("{}: metadata '{}' must be bool, is {}", path(), key, value_type_name(v->type));
  return v->u != 0;
}

const std::string& GgufFile::get_string(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail("{}: missing metadata key '{}'", path(), key);
  if (v->type != ValueType::STRING)
    fail("{}: metadata '{}' must be a string, is {}", path(), key, value_type_name(v->type));
  return v->s;
}

uint64_t GgufFile::get_uint_or(const std::string& key, uint64_t fallback) const {
  return find(key) ? get_uint(key) : fallback;
}

double GgufFile::get_float_or(const std::string& key, double fallback) const {
  return find(key) ? get_float(key) : fallback;
}

bool GgufFile::get_bool_or(const std::string& key, bool fallback) const { return find(key) ? get_bool(key) : fallback; }

const TensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo& GgufFile::tensor(const std::string& name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) fail("{}: missing tensor '{}'", path(), name);
  return *t;
}

std::vector<int32_t> GgufFile::to_i32(const TensorInfo& t) const {
  if (t.type != TensorType::I32) fail("{}: tensor '{}' has type {}, expected I32", path(), t.name, type_name(t.type));
  std::vector<int32_t> out(static_cast<size_t>(t.n_elements));
  if (!out.empty()) std::memcpy(out.data(), t.data, out.size() * 4);
  return out;
}

}  // namespace ggtrain::gguf
