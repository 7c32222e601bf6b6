#include "gguf/writer.h"

#include <cstring>

#include "gguf/reader.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::gguf {

namespace {

// Serialises the header into memory; tensor data is streamed separately.
class Bytes {
 public:
  template <typename T>
  void put(T v) {
    append(&v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    append(s.data(), s.size());
  }
  void put_value(const Value& v) {
    switch (v.type) {
      case ValueType::U8: put<uint8_t>(static_cast<uint8_t>(v.u)); break;
      case ValueType::I8: put<int8_t>(static_cast<int8_t>(v.i)); break;
      case ValueType::U16: put<uint16_t>(static_cast<uint16_t>(v.u)); break;
      case ValueType::I16: put<int16_t>(static_cast<int16_t>(v.i)); break;
      case ValueType::U32: put<uint32_t>(static_cast<uint32_t>(v.u)); break;
      case ValueType::I32: put<int32_t>(static_cast<int32_t>(v.i)); break;
      case ValueType::U64: put<uint64_t>(v.u); break;
      case ValueType::I64: put<int64_t>(v.i); break;
      case ValueType::F32: put<float>(static_cast<float>(v.f)); break;
      case ValueType::F64: put<double>(v.f); break;
      case ValueType::BOOL: put<uint8_t>(v.u ? 1 : 0); break;
      case ValueType::STRING: put_string(v.s); break;
      case ValueType::ARRAY:
        put<uint32_t>(static_cast<uint32_t>(v.elem_type));
        put<uint64_t>(v.items.size());
        for (const auto& item : v.items) {
          if (item.type != v.elem_type)
            fail("GGUF writer: array of {} holds a {}", value_type_name(v.elem_type), value_type_name(item.type));
          put_value(item);
        }
        break;
    }
  }
  void append(const void* p, size_t n) {
    size_t at = buf_.size();
    buf_.resize(at + n);
    if (n) std::memcpy(buf_.data() + at, p, n);
  }
  const std::vector<uint8_t>& data() const { return buf_; }
  size_t size() const { return buf_.size(); }

 private:
  std::vector<uint8_t> buf_;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void GgufWriter::set(const std::string& key, Value v) {
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::set_alignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail("GGUF writer: alignment {} is not a power of two", alignment);
  alignment_ = alignment;
  set("general.alignment", Value::u32(alignment));
}

void GgufWriter::add(Pending p) {
  if (p.name.size() > kMaxTensorName)
    fail("GGUF writer: tensor name '{}' is longer than {} bytes", p.name, kMaxTensorName);
  if (p.ne.empty() || p.ne.size() > kMaxDims) fail("GGUF writer: tensor '{}' has {} dimensions", p.name, p.ne.size());
  for (const auto& t : tensors_)
    if (t.name == p.name) fail("GGUF writer: duplicate tensor '{}'", p.name);
  const auto& tr = traits(p.type);
  if (p.ne[0] % tr.block_size != 0)
    fail("GGUF writer: tensor '{}' ne[0]={} is not a multiple of the {} block size {}", p.name, p.ne[0], tr.name,
         tr.block_size);
  p.n_elements = 1;
  for (auto d : p.ne) p.n_elements *= d;
  p.n_bytes = p.n_elements / tr.block_size * tr.type_size;
  tensors_.push_back(std::move(p));
}

void GgufWriter::add_tensor_encoded(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                                    const float* data, FloatEncoder encode) {
  if (!encode) fail("GGUF writer: tensor '{}': no encoder for {}", name, type_name(type));
  add({name, type, std::move(ne), data, encode, 0, 0});
}

void GgufWriter::add_tensor_raw(const std::string& name, TensorType type, std::vector<uint64_t> ne, const void* bytes) {
  add({name, type, std::move(ne), bytes, nullptr, 0, 0});
}

void GgufWriter::write(const std::string& path) const {
  Bytes h;
  h.put<uint32_t>(kMagic);
  h.put<uint32_t>(3);
  h.put<uint64_t>(tensors_.size());
  h.put<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    h.put_string(k);
    h.put<uint32_t>(static_cast<uint32_t>(v.type));
    h.put_value(v);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    h.put_string(t.name);
    h.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (auto d : t.ne) h.put<uint64_t>(d);
    h.put<uint32_t>(static_cast<uint32_t>(t.type));
    h.put<uint64_t>(offset);
    offset = align_up(offset + t.n_bytes, alignment_);
  }

  AtomicFileWriter out(path);
  out.write(h.data().data(), h.size());
  out.write_zeros(align_up(h.size(), alignment_) - h.size());
  std::vector<uint8_t> chunk;
  constexpr size_t kChunkElems = 1 << 16;  // multiple of every block size used here
  for (const auto& t : tensors_) {
    if (!t.encode) {
      out.write(t.data, t.n_bytes);
    } else {
      const float* src = static_cast<const float*>(t.data);
      for (uint64_t i = 0; i < t.n_elements; i += kChunkElems) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkElems, t.n_elements - i));
        chunk.resize(storage_bytes(t.type, n));
        t.encode(src + i, chunk.data(), n);
        out.write(chunk.data(), chunk.size());
      }
    }
    out.write_zeros(align_up(t.n_bytes, alignment_) - t.n_bytes);
  }
  out.commit();
}

}  // namespace ggtrain::gguf
