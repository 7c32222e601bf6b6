#pragma once
// RFC 3629 UTF-8 validation, shared by every reader that must refuse bytes
// that are not text (GGUF keys and names, config strings, corpus documents).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ggtrain {

// The offset of the first byte of the first ill-formed sequence in s
// (overlong, surrogate, past U+10FFFF, truncated, stray continuation), or -1
// when s is valid.
int64_t first_invalid_utf8(const char* s, size_t n);

inline bool valid_utf8(std::string_view s) { return first_invalid_utf8(s.data(), s.size()) < 0; }

}  // namespace ggtrain
