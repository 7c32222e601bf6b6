#include "util/utf8.h"

#include <simdjson.h>

namespace ggtrain {

namespace {

// The length of the well-formed sequence at p (Unicode table 3-7), or 0.
size_t valid_sequence_length(const unsigned char* p, size_t avail) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
    if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // no overlong 4-byte forms
    if (c == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (avail < len || p[1] < lo || p[1] > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if ((p[k] & 0xC0) != 0x80) return 0;
  return len;
}

}  // namespace

int64_t first_invalid_utf8(const char* s, size_t n) {
  // simdjson's validator (GB/s) answers the common case; the byte loop only
  // runs to find where a bad sequence is.
  if (simdjson::validate_utf8(s, n)) return -1;
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  for (size_t i = 0; i < n;) {
    const size_t len = valid_sequence_length(p + i, n - i);
    if (len == 0) return int64_t(i);
    i += len;
  }
  return -1;
}

}  // namespace ggtrain
