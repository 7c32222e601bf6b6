#pragma once
// FNV-1a 64: a cheap fingerprint of a buffer (e.g. a frozen table a resumed
// run must find unchanged). Not for security.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ggtrain {

// `h` continues a previous call's hash (several buffers as one stream).
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* b = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

// The same recurrence over 64-bit words (the tail zero-padded): 8x fewer
// multiplies, for fingerprints of whole parameter buffers (hundreds of MB).
inline uint64_t fnv1a_words(const void* data, size_t n_bytes) {
  const auto* b = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n_bytes; i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, b + i, n_bytes - i < 8 ? n_bytes - i : 8);
    h = (h ^ w) * 0x100000001b3ULL;
  }
  return h;
}

}  // namespace ggtrain
