#pragma once
// GGUF v3 writer. Tensors are registered as pointers to caller-owned data and
// streamed (floats encoded on the fly by the caller's encoder, e.g.
// quant::add_float_tensor's) at write() time, so a
// checkpoint never needs a second copy of the model in memory. The same input
// gives the same bytes; the file appears atomically (util/atomic_file.h).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/types.h"
#include "gguf/value.h"

namespace ggtrain::gguf {

class GgufWriter {
 public:
  // Sets (or replaces, keeping its position) a metadata key.
  void set(const std::string& key, Value v);
  // Also written as general.alignment (always, even for the default 32).
  void set_alignment(uint32_t alignment);

  // Converts n floats to n elements of a type; n a multiple of its block size.
  using FloatEncoder = void (*)(const float* x, uint8_t* out, size_t n);
  // ne in ggml order (ne[0] contiguous). `data` holds n floats and must stay
  // valid until write(), which stores them as `type` through `encode`.
  void add_tensor_encoded(const std::string& name, TensorType type, std::vector<uint64_t> ne, const float* data,
                          FloatEncoder encode);
  // Raw, already-encoded bytes of `type` (e.g. I32 tokens or copied blocks).
  void add_tensor_raw(const std::string& name, TensorType type, std::vector<uint64_t> ne, const void* bytes);

  void write(const std::string& path) const;
  size_t tensor_count() const { return tensors_.size(); }
  uint64_t element_count() const {
    uint64_t n = 0;
    for (const auto& t : tensors_) n += t.n_elements;
    return n;
  }

 private:
  struct Pending {
    std::string name;
    TensorType type;
    std::vector<uint64_t> ne;
    const void* data;
    FloatEncoder encode;  // null: data holds the encoded bytes
    uint64_t n_elements;
    uint64_t n_bytes;
  };
  void add(Pending p);
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Pending> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace ggtrain::gguf
