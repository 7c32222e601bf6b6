#include "gguf/types.h"

#include <cctype>
#include <string>

#include "util/error.h"

namespace ggtrain::gguf {

using detail::kTypes;

const TypeTraits& traits(TensorType t) {
  for (const auto& e : kTypes)
    if (e.id == static_cast<uint32_t>(t)) return e.traits;
  fail("unknown ggml tensor type id {}", static_cast<uint32_t>(t));
}

std::string_view type_name(TensorType t) { return traits(t).name; }

size_t storage_bytes(TensorType t, size_t n) {
  const auto& tr = traits(t);
  return n / tr.block_size * tr.type_size;
}

std::optional<TensorType> type_from_name(std::string_view name) {
  std::string upper(name);
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& e : kTypes)
    if (e.traits.name == upper) return static_cast<TensorType>(e.id);
  return std::nullopt;
}

}  // namespace ggtrain::gguf
