#include "support/varied_text.h"

#include <array>
#include <string_view>

#include "util/rng.h"

namespace ggtrain::test_support {

namespace {

using List = std::vector<std::string_view>;

const List kWords = {
    "the",       "And",    "LORD",      "God",     "said",    "unto",      "Moses",      "xylophone",
    "quizzical", "hello",  "World",     "HELLO",   "mIxEd",   "CamelCase", "snake_case", "kebab-case",
    "a",         "I",      "x",         "ok",      "OK",      "Ok",        "beginning",  "heaven",
    "earth",     "waters", "firmament", "thereof", "evening", "morning",   "tokenizer",  "Tokenization",
    "BPE",       "GGUF",   "llama",     "Llama",   "SmolLM",  "don",       "t"};
const List kContractions = {"don't", "it's", "It'S",        "we're",  "WE'RE",        "I've",     "I'm",   "you'll",
                            "he'd",  "'tis", "rock'n'roll", "O'Neil", "students'",    "'quoted'", "can't", "won't",
                            "y'all", "'S",   "'re",         "'Ve",    "'LL",          "'D",       "'M",    "'T",
                            "''",    "'",    "it' s",       "' s",    "shouldn't've", "l'homme"};
const List kAccents = {"caf\u00e9",
                       "na\u00efve",
                       "r\u00e9sum\u00e9",
                       "\u00c6r\u00f8sk\u00f8bing",
                       "Stra\u00dfe",
                       "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
                       "\u0420\u0443\u0441\u0441\u043a\u0438\u0439",
                       "T\u00fcrk\u00e7e",
                       "\u0130stanbul",
                       "\u01c5emal",
                       "e\u0301t\u00e9",
                       "Ti\u1ebfng Vi\u1ec7t",
                       "\u00d1and\u00fa",
                       "fa\u00e7ade",
                       "\u00d8resund",
                       "\u0141\u00f3d\u017a",
                       "\u010cesk\u00fd",
                       "\ufb01nance",
                       "\u0149",
                       "\u00e0\u00e9\u00ee\u00f5\u00fc",
                       "\u00c0\u00c9\u00ce\u00d5\u00dc",
                       "\u05e2\u05d1\u05e8\u05d9\u05ea",
                       "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
                       "\u0939\u093f\u0928\u094d\u0926\u0940",
                       "\u0e44\u0e17\u0e22"};
const List kCjk = {"\u4e2d\u6587",
                   "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
                   "\ud55c\uad6d\uc5b4",
                   "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
                   "\u6f22\u5b57",
                   "\u30ab\u30bf\u30ab\u30ca",
                   "\u4e2d\u6587abc123",
                   "\u7b2c1\u7ae0",
                   "\uff46\uff55\uff4c\uff4c",
                   "\uff11\uff12\uff13",
                   "\u3002",
                   "\u3001",
                   "\u300c\u5f15\u7528\u300d"};
const List kEmoji = {"\U0001f642",
                     "\U0001f44d",
                     "\U0001f44d\U0001f3fd",
                     "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",
                     "\U0001f1fa\U0001f1f8",
                     "1\ufe0f\u20e3",
                     "\U0001f680\U0001f680",
                     "\u2764\ufe0f",
                     "\u2728",
                     "\U0001f600x"};
const List kSymbols = {"\u2211", "\u222b", "\u221a", "\u221e", "\u2260", "\u2264", "\u2265", "\u00b1", "\u00d7",
                       "\u00f7", "\u20ac", "\u00a3", "\u00a5", "\u20b9", "\u00a9", "\u00ae", "\u2122", "\u00a7",
                       "\u00b6", "\u2020", "\u2021", "\u2022", "\u2030", "\u2190", "\u2192", "\u21d2", "\u00b0",
                       "\u00b5", "\u00ac", "\u00a6", "\ufffd",
                       // Assigned in Unicode 15.1 (a letter, an ideographic description
                       // character) and 16.0 (unassigned in llama.cpp's tables).
                       "\U0002ebf0", "\u2ffc", "\u1c89"};
const List kPunct = {"!!!",    "?!",     "...",    "\u2014", "\u2013", "\u2026", "\u00ab", "\u00bb", "\u201c", "\u201d",
                     "\u2018", "\u2019", "\u201e", "\u00bf", "\u00a1", "(",      ")",      "[",      "]",      "{",
                     "}",      "<",      ">",      "/",      "\\",     "@",      "#",      "%",      "&",      "*",
                     "_",      "-",      "+",      "=",      "|",      "~",      "^",      "`",      "$",      ":",
                     ";",      ",",      ".",      "'",      "\"",     " ?",     " !",     " .",     " ,",     " ' ",
                     "?!.,",   "$$$",    "+=",     "<=>",    "^^",     "||",     "~~"};
const List kCode = {"for (int i = 0; i < n; ++i) {",
                    "x += a[i];",
                    "}",
                    "def f(x): return x**2",
                    "if (a && b || !c) {}",
                    "<div class=\"x\">",
                    "$var = @arr[0];",
                    "a->b",
                    "x != y",
                    "#include <vector>",
                    "// comment",
                    "/* block */",
                    "`backticks`",
                    "~/path/to-file.txt",
                    "|pipe|",
                    "^caret",
                    "a+=b",
                    "x <<= 2",
                    "=>",
                    "std::vector<int>",
                    "0xDEADBEEF",
                    "0b1010",
                    "1e-5",
                    "3.14159",
                    "-7",
                    "+8",
                    "printf(\"%d\\n\", x);",
                    "SELECT * FROM t WHERE id=42;",
                    "{\"key\": [1, 2, 3]}",
                    "http://example.org/a?b=c&d=e#f",
                    "user@example.com",
                    "    return 0;",
                    "\tindented();",
                    "x=1;y=2;z=x+y",
                    "arr[12345]",
                    "v1.2.3-rc4"};
const List kSpecials = {"<|endoftext|>",
                        "<|user|>",
                        "[[USER]]",
                        "ab@@c",
                        "b@@cd",
                        "ab@@",
                        "@@cd",
                        "x@@y",
                        "<s>",
                        "</s>",
                        "<unk>",
                        "[MASK]",
                        "<|begin_of_text|>",
                        "<|end_of_text|>",
                        "<|im_start|>",
                        "<|im_end|>",
                        " @@ ",
                        "<|eot_id|>",
                        "<|channel|>",
                        "<|reserved_special_token_3|>",
                        "[[USER]]   after",
                        "before   [MASK]",
                        "<|endoftext|><|endoftext|>"};
const List kSpaces = {" ",  "  ",   "   ",    "    ",   "        ", "\t",     "\t\t",   " \t ",   "\v",     "\f",
                      "\r", " \r ", "\u00a0", "\u2003", "\u3000",   "\u2028", "\u0085", "\u200b", "\u202f", " \u00a0 "};
const List kOtherDigits = {"\u0663\u0664\u0665", "\u00bd", "\u00b2",      "\u216b",
                           "\u0967\u0968\u0969", "\u2460", "\u00b3\u00b9"};

std::string_view pick(Rng& rng, const List& l) { return l[rng.next_u64() % l.size()]; }

std::string digits(Rng& rng) {
  static constexpr std::array<int, 8> lengths = {1, 2, 3, 4, 5, 7, 12, 40};
  std::string s;
  const int n = lengths[rng.next_u64() % lengths.size()];
  for (int i = 0; i < n; ++i) s += char('0' + rng.next_u64() % 10);
  switch (rng.next_u64() % 6) {
    case 0: return s + "." + std::to_string(rng.next_u64() % 1000);
    case 1: return "1,000,000";
    case 2: return "2024-01-31 12:30";
    case 3: return std::string(pick(rng, kOtherDigits));
    default: return s;
  }
}

std::string fragment(Rng& rng) {
  switch (rng.next_u64() % 14) {
    case 0:
    case 1:
    case 2: return std::string(pick(rng, kWords));
    case 3: return std::string(pick(rng, kContractions));
    case 4: return digits(rng);
    case 5: return std::string(pick(rng, kCode));
    case 6: return std::string(pick(rng, kPunct));
    case 7:
    case 8: return std::string(pick(rng, kAccents));
    case 9: return std::string(pick(rng, kCjk));
    case 10: return std::string(pick(rng, kEmoji));
    case 11: return std::string(pick(rng, kSymbols));
    case 12: return std::string(pick(rng, kSpecials));
    default: return std::string(pick(rng, kSpaces));
  }
}

std::string separator(Rng& rng) {
  const uint64_t r = rng.next_u64() % 10;
  if (r < 6) return " ";
  if (r < 8) return "";
  return std::string(pick(rng, kSpaces));
}

}  // namespace

std::vector<std::string> varied_lines(int n, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::string> lines;
  while (int(lines.size()) < n) {
    std::string line;
    if (rng.next_u64() % 8 == 0) line += pick(rng, kSpaces);
    const int parts = 1 + int(rng.next_u64() % 14);
    for (int i = 0; i < parts; ++i) {
      if (i > 0) line += separator(rng);
      line += fragment(rng);
    }
    if (rng.next_u64() % 8 == 0) line += pick(rng, kSpaces);
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace ggtrain::test_support
