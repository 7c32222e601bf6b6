#pragma once
// The Unicode facts llama.cpp's byte-level BPE tokenizer relies on
// (src/unicode.{h,cpp} there): code point classes, its lenient UTF-8
// decoder, and GPT-2's byte <-> printable-character mapping.
//
// Classes come from ICU (Debian's libicu, u_charType), pinned to the Unicode
// version of llama.cpp's generated tables, 15.1: characters ICU assigns in a
// later version count as unassigned, and the 627 characters 15.1 added are
// supplied here when ICU predates it (Debian 12 ships ICU 72 = Unicode 15.0).
// llama.cpp regenerates its tables only now and then (scripts/gen-unicode-data.py,
// "latest" UnicodeData.txt at the time): a build with newer tables classifies
// characters assigned after 15.1 differently, and so may split text around
// them differently.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::tokenizer::unicode {

// llama.cpp's unicode_cpt_flags bits: one general-category bit per code
// point plus the White_Space property.
enum Flag : uint16_t {
  kUndefined = 0x0001,  // Cn (unassigned), and anything past U+10FFFF
  kNumber = 0x0002,  // \p{N}
  kLetter = 0x0004,  // \p{L}
  kSeparator = 0x0008,  // \p{Z}
  kMark = 0x0010,  // \p{M}
  kPunctuation = 0x0020,  // \p{P}
  kSymbol = 0x0040,  // \p{S}
  kControl = 0x0080,  // \p{C} except Cn
  kCategories = 0x00FF,
  kWhitespace = 0x0100,  // PropList.txt White_Space
};

// Never 0: every code point has a category.
uint16_t flags(uint32_t cpt);

// llama.cpp's unicode_cpts_from_utf8: lead bytes announce the length and
// continuation bytes are checked, but overlong forms and surrogates are
// accepted as they decode; a bad or truncated sequence gives U+FFFD for its
// first byte and decoding goes on at the next byte. A 4-byte form above
// U+10FFFF (lead F5..F7) also gives U+FFFD here, for all 4 bytes: llama.cpp
// decodes it but then throws while re-encoding, failing the whole call.
std::vector<uint32_t> decode_utf8_lenient(std::string_view text);

// Appends the UTF-8 form of a code point <= U+10FFFF (surrogates included,
// as llama.cpp writes them).
void append_utf8(std::string& out, uint32_t cpt);

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
// the other 68 bytes for U+0100.. in byte order.
const std::string& byte_to_unicode(uint8_t byte);
// The byte a code point stands for, or -1.
int unicode_to_byte(uint32_t cpt);

}  // namespace ggtrain::tokenizer::unicode
