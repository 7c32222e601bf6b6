#pragma once
// Deterministic lines of varied text for tokenizer tests: ASCII words in
// every case, contractions, digits (long runs, decimals, other scripts'
// digits), code, punctuation runs, accents and combining marks, Greek,
// Cyrillic, CJK, emoji sequences, symbols, special-token look-alikes, and
// whitespace of every kind (runs of spaces, tabs, CR, VT, FF, no-break and
// ideographic spaces, U+2028, U+0085) inside and around the text.
// No line holds '\n' or is empty; all are valid UTF-8.
#include <cstdint>
#include <string>
#include <vector>

namespace ggtrain::test_support {

std::vector<std::string> varied_lines(int n, uint64_t seed);

}  // namespace ggtrain::test_support
