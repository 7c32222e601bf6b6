#pragma once
// FNV-1a 64: a cheap fingerprint of a buffer (e.g. a frozen table a resumed
// run must find unchanged). Not for security.
#include <cstddef>
#include <cstdint>

namespace ggtrain {

// `h` continues a previous call's hash (several buffers as one stream).
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* b = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace ggtrain
