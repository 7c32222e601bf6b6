#include "tokenizer/unicode.h"

#include <unicode/uchar.h>

#include <array>

namespace ggtrain::tokenizer::unicode {

namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr uint32_t kReplacement = 0xFFFD;

// The version llama.cpp's tables were generated from (src/unicode-data.cpp:
// U+2EBF0 is a letter there, U+1C89 of Unicode 16.0 is unassigned).
constexpr int kMajor = 15, kMinor = 1;

uint16_t category_flag(int8_t category) {
  switch (category) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER: return kLetter;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK: return kMark;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER: return kNumber;
    case U_SPACE_SEPARATOR:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR: return kSeparator;
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE: return kControl;
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION: return kPunctuation;
    case U_MATH_SYMBOL:
    case U_CURRENCY_SYMBOL:
    case U_MODIFIER_SYMBOL:
    case U_OTHER_SYMBOL: return kSymbol;
    default: return kUndefined;  // U_UNASSIGNED
  }
}

// What Unicode 15.1 added (627 characters), for an ICU that predates it.
uint16_t added_in_15_1(uint32_t c) {
  if (c >= 0x2EBF0 && c <= 0x2EE5D) return kLetter;  // CJK Unified Ideographs Extension I (Lo)
  if ((c >= 0x2FFC && c <= 0x2FFF) || c == 0x31EF) return kSymbol;  // ideographic description, CJK stroke (So)
  return 0;
}

uint16_t category_of(uint32_t c) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  const bool assigned = u_charType(static_cast<UChar32>(c)) != U_UNASSIGNED;
  if (assigned && (age[0] > kMajor || (age[0] == kMajor && age[1] > kMinor))) return kUndefined;
  if (!assigned)
    if (uint16_t f = added_in_15_1(c)) return f;
  return category_flag(static_cast<int8_t>(u_charType(static_cast<UChar32>(c))));
}

// PropList.txt White_Space (the same list llama.cpp's generator hard-codes).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

struct Table {
  std::vector<uint16_t> flags;
  Table() : flags(kMaxCodepoint + 1) {
    for (uint32_t c = 0; c <= kMaxCodepoint; ++c)
      flags[c] = static_cast<uint16_t>(category_of(c) | (is_white_space(c) ? kWhitespace : 0));
  }
};

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> from_unicode;  // all mapped code points are < U+0144
  ByteMap() {
    from_unicode.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cpt = printable ? uint32_t(b) : next++;
      append_utf8(to_unicode[b], cpt);
      from_unicode[cpt] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

bool is_continuation(std::string_view s, size_t i) {
  return i < s.size() && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80;
}

}  // namespace

uint16_t flags(uint32_t cpt) {
  static const Table table;
  return cpt <= kMaxCodepoint ? table.flags[cpt] : uint16_t(kUndefined);
}

std::vector<uint32_t> decode_utf8_lenient(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    size_t n = 0;  // sequence length when the lead byte and its continuations are good
    uint32_t cpt = 0;
    if (b < 0x80) {
      n = 1, cpt = b;
    } else if ((b & 0xE0) == 0xC0 && is_continuation(s, i + 1)) {
      n = 2, cpt = b & 0x1Fu;
    } else if ((b & 0xF0) == 0xE0 && is_continuation(s, i + 1) && is_continuation(s, i + 2)) {
      n = 3, cpt = b & 0x0Fu;
    } else if ((b & 0xF8) == 0xF0 && is_continuation(s, i + 1) && is_continuation(s, i + 2) &&
               is_continuation(s, i + 3)) {
      n = 4, cpt = b & 0x07u;
    }
    if (n == 0) {  // stray continuation byte, F8..FF, or a cut/broken sequence
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    for (size_t k = 1; k < n; ++k) cpt = (cpt << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3Fu);
    out.push_back(cpt <= kMaxCodepoint ? cpt : kReplacement);
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((c >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

const std::string& byte_to_unicode(uint8_t byte) { return byte_map().to_unicode[byte]; }

int unicode_to_byte(uint32_t cpt) { return cpt < byte_map().from_unicode.size() ? byte_map().from_unicode[cpt] : -1; }

}  // namespace ggtrain::tokenizer::unicode
