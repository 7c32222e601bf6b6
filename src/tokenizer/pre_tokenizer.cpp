#include "tokenizer/pre_tokenizer.h"

#include <array>
#include <cstdint>

#include "tokenizer/unicode.h"

namespace ggtrain::tokenizer {

namespace {

namespace uc = unicode;

// The names llama.cpp's llama_vocab::load maps onto the four regex lists
// below, with the flags it sets for each.
constexpr std::array kPreTokenizers = {
    PreTokenizer{"default", PreSplit::kDefault, false, true, false},
    PreTokenizer{"gpt-2", PreSplit::kGpt2, false, true, false},
    PreTokenizer{"phi-2", PreSplit::kGpt2, false, true, false},
    PreTokenizer{"mpt", PreSplit::kGpt2, false, true, false},
    PreTokenizer{"olmo", PreSplit::kGpt2, false, true, false},  // OLMo, OLMoE: GPT-2's split
    PreTokenizer{"llama-bpe", PreSplit::kLlama3, true, true, true},
    PreTokenizer{"llama3", PreSplit::kLlama3, true, true, true},
    PreTokenizer{"llama-v3", PreSplit::kLlama3, true, true, true},
    PreTokenizer{"lfm2", PreSplit::kLlama3, true, true, true},  // LFM2, LFM2.5: llama.cpp reads it as llama3
    PreTokenizer{"smollm", PreSplit::kSmollm, false, false, false},
    PreTokenizer{"qwen2", PreSplit::kQwen2, false, false, false},
    PreTokenizer{"deepseek-r1-qwen", PreSplit::kQwen2, false, false, false},
    PreTokenizer{"qwen35", PreSplit::kQwen35, false, false, false},
    PreTokenizer{"starcoder", PreSplit::kSmollm, false, true, false},
};

using Cpts = std::vector<uint32_t>;
// A split is a list of piece lengths in code points, covering the text.
using Pieces = std::vector<size_t>;

constexpr uint32_t kOutside = 0xFFFFFFFF;
constexpr uint16_t kWsLetterNumber = uc::kWhitespace | uc::kLetter | uc::kNumber;

// One piece of the previous split, seen the way llama.cpp's custom splitters
// see it: positions outside [begin, end) have no code point and no flags.
struct Span {
  const Cpts& cpts;
  size_t begin, end;
  uint32_t cpt(size_t i) const { return i >= begin && i < end ? cpts[i] : kOutside; }
  uint16_t flags(size_t i) const { return i >= begin && i < end ? uc::flags(cpts[i]) : 0; }
};

// Collects the pieces of one span: each cut ends the piece begun at the
// previous cut (empty pieces are dropped).
struct Cutter {
  Pieces& out;
  size_t prev;
  void cut(size_t at) {
    if (at > prev) out.push_back(at - prev);
    prev = at;
  }
};

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
bool is_cr_lf(uint32_t c) { return c == '\r' || c == '\n'; }

// 's 't 'm 'd 're 've 'll at `pos` (`fold`: case-insensitive, as llama3's
// (?i:...); Unicode's lower-case mapping sends no non-ASCII code point to these
// letters, so ASCII folding is the same). Returns the length matched, or 0.
size_t contraction(const Span& s, size_t pos, bool fold) {
  if (s.cpt(pos) != '\'' || pos + 1 >= s.end) return 0;
  auto at = [&](size_t i) { return fold ? ascii_lower(s.cpt(i)) : s.cpt(i); };
  const uint32_t a = at(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= s.end) return 0;
  const uint32_t b = at(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

size_t whitespace_run(const Span& s, size_t pos) {
  size_t n = 0;
  while (s.flags(pos + n) & uc::kWhitespace) ++n;
  return n;
}

// unicode_regex_split_custom_gpt2: GPT-2's regex, written out by hand.
void split_gpt2_span(const Span& s, Pieces& out) {
  Cutter cut{out, s.begin};
  for (size_t pos = s.begin; pos < s.end;) {
    const uint32_t c = s.cpt(pos);
    if (size_t n = contraction(s, pos, false)) {
      cut.cut(pos += n);
      continue;
    }
    // ` ?X+` for X = letters, numbers, or anything else but whitespace
    // (tried in that order on the code point after an optional space).
    auto take = [&](uint16_t f, auto in_class) {
      if (!in_class(f)) return false;
      pos += c == ' ';
      while (in_class(f)) f = s.flags(++pos);
      cut.cut(pos);
      return true;
    };
    const uint16_t f = c == ' ' ? s.flags(pos + 1) : s.flags(pos);
    if (take(f, [](uint16_t fl) { return (fl & uc::kLetter) != 0; }) ||
        take(f, [](uint16_t fl) { return (fl & uc::kNumber) != 0; }) ||
        take(f, [](uint16_t fl) { return !(fl & kWsLetterNumber) && fl != 0; }))
      continue;
    // \s+(?!\S) leaves the last space of a run before non-space to the next
    // word; \s+ takes a run at the end.
    const size_t n = whitespace_run(s, pos);
    if (n > 1 && s.cpt(pos + n) != kOutside) pos += n - 1;
    else pos += n > 0 ? n : 1;  // n == 0: no alternative matches, one code point alone
    cut.cut(pos);
  }
}

// unicode_regex_split_custom_llama3 (max_digits 3), _qwen2 (1) and _qwen35
// (1, `letters` with combining marks): the llama3 regex, written out by
// hand; qwen2's differs only in \p{N} for \p{N}{1,3}, qwen35's in
// [\p{L}\p{M}] for \p{L} (in the punctuation class's complement too).
void split_llama3_like_span(const Span& s, Pieces& out, size_t max_digits, uint16_t letters = uc::kLetter) {
  const uint16_t ws_letter_number = uc::kWhitespace | letters | uc::kNumber;
  Cutter cut{out, s.begin};
  for (size_t pos = s.begin; pos < s.end;) {
    const uint32_t c = s.cpt(pos);
    const uint16_t f = s.flags(pos);
    if (size_t n = contraction(s, pos, true)) {
      cut.cut(pos += n);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_cr_lf(c) && !(f & uc::kNumber) && ((f & letters) || (s.flags(pos + 1) & letters))) {
      ++pos;
      while (s.flags(pos) & letters) ++pos;
      cut.cut(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (f & uc::kNumber) {
      for (size_t start = pos; s.flags(pos) & uc::kNumber;)
        if (++pos - start >= max_digits) cut.cut(start = pos);
      cut.cut(pos);
      continue;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (llama.cpp tests the first code point's own
    // flags for "is something", which any code point is).
    uint16_t f2 = c == ' ' ? s.flags(pos + 1) : f;
    if (!(f2 & ws_letter_number) && f != 0) {
      pos += c == ' ';
      while (!(f2 & ws_letter_number) && f2 != 0) f2 = s.flags(++pos);
      while (is_cr_lf(s.cpt(pos))) ++pos;
      cut.cut(pos);
      continue;
    }
    // \s*[\r\n]+ up to the last CR/LF of the run, else \s+(?!\S), else \s+.
    const size_t n = whitespace_run(s, pos);
    size_t last_cr_lf_end = 0;
    for (size_t k = 0; k < n; ++k)
      if (is_cr_lf(s.cpt(pos + k))) last_cr_lf_end = pos + k + 1;
    if (last_cr_lf_end > 0) pos = last_cr_lf_end;
    else if (n > 1 && s.cpt(pos + n) != kOutside) pos += n - 1;
    else pos += n > 0 ? n : 1;
    cut.cut(pos);
  }
}

void split_llama3_span(const Span& s, Pieces& out) { split_llama3_like_span(s, out, 3); }
void split_qwen2_span(const Span& s, Pieces& out) { split_llama3_like_span(s, out, 1); }
void split_qwen35_span(const Span& s, Pieces& out) { split_llama3_like_span(s, out, 1, uc::kLetter | uc::kMark); }

// A std::regex_iterator pass of a single-class regex: `greedy` takes maximal
// runs of the class (X+), otherwise each member alone (X); the text between
// matches stays one piece.
void split_class_span(const Span& s, Pieces& out, bool (*member)(uint32_t), bool greedy) {
  Cutter cut{out, s.begin};
  for (size_t pos = s.begin; pos < s.end;) {
    if (!member(s.cpts[pos])) {
      ++pos;
      continue;
    }
    cut.cut(pos);
    ++pos;
    while (greedy && pos < s.end && member(s.cpts[pos])) ++pos;
    cut.cut(pos);
  }
  cut.cut(s.end);
}

// [0-9][0-9][0-9], matched left to right without overlap.
void split_digit_triples_span(const Span& s, Pieces& out) {
  auto digit = [&](size_t i) { return i < s.end && s.cpts[i] >= '0' && s.cpts[i] <= '9'; };
  Cutter cut{out, s.begin};
  for (size_t pos = s.begin; pos < s.end;) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      cut.cut(pos);
      cut.cut(pos += 3);
    } else {
      ++pos;
    }
  }
  cut.cut(s.end);
}

// llama.cpp runs a regex that uses \p{..} over a "collapsed" text: ASCII
// stays as is, other code points become one byte per category (whitespace
// first). So \p{P} is ASCII punctuation !"#%&'()*,-./:;?@[\]_{} or a
// non-ASCII, non-space punctuation mark, and \p{N} is 0-9 or a non-ASCII,
// non-space number.
bool is_punct_or_listed(uint32_t c) {
  if (c < 128) return std::string_view("!\"#%&'()*,-./:;?@[\\]_{}$+<=>^~|").find(char(c)) != std::string_view::npos;
  const uint16_t f = uc::flags(c);
  return !(f & uc::kWhitespace) && (f & uc::kCategories) == uc::kPunctuation;
}
bool is_number(uint32_t c) {
  if (c < 128) return c >= '0' && c <= '9';
  const uint16_t f = uc::flags(c);
  return !(f & uc::kWhitespace) && (f & uc::kCategories) == uc::kNumber;
}

// Applies one splitter to every piece of the previous split.
template <typename F>
Pieces refine(const Cpts& cpts, const Pieces& pieces, F&& split_span) {
  Pieces out;
  out.reserve(pieces.size() * 2);
  size_t begin = 0;
  for (size_t len : pieces) {
    split_span(Span{cpts, begin, begin + len}, out);
    begin += len;
  }
  return out;
}

Pieces split(const Cpts& cpts, PreSplit kind) {
  Pieces p{cpts.size()};
  auto gpt2 = [&] { p = refine(cpts, p, split_gpt2_span); };
  auto runs = [&](bool (*member)(uint32_t), bool greedy) {
    p = refine(cpts, p, [&](const Span& s, Pieces& out) { split_class_span(s, out, member, greedy); });
  };
  switch (kind) {
    case PreSplit::kDefault:
      runs(is_punct_or_listed, true);
      gpt2();
      runs(is_number, true);
      p = refine(cpts, p, split_digit_triples_span);
      break;
    case PreSplit::kGpt2: gpt2(); break;
    case PreSplit::kLlama3: p = refine(cpts, p, split_llama3_span); break;
    case PreSplit::kQwen2: p = refine(cpts, p, split_qwen2_span); break;
    case PreSplit::kQwen35: p = refine(cpts, p, split_qwen35_span); break;
    case PreSplit::kSmollm:
      runs(is_number, false);
      gpt2();
      break;
  }
  return p;
}

}  // namespace

const PreTokenizer* find_pre_tokenizer(std::string_view name) {
  if (name.empty()) name = "default";
  for (const auto& p : kPreTokenizers)
    if (p.name == name) return &p;
  return nullptr;
}

std::string pre_tokenizer_names() {
  std::string out;
  for (const auto& p : kPreTokenizers) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

std::vector<std::string> pre_tokenize(std::string_view text, PreSplit kind) {
  const Cpts cpts = uc::decode_utf8_lenient(text);
  std::vector<std::string> words;
  if (cpts.empty()) return words;
  const Pieces pieces = split(cpts, kind);
  words.reserve(pieces.size());
  std::string utf8;
  size_t begin = 0;
  for (size_t len : pieces) {
    utf8.clear();
    for (size_t i = begin; i < begin + len; ++i) uc::append_utf8(utf8, cpts[i]);
    std::string& w = words.emplace_back();
    for (char ch : utf8) w += uc::byte_to_unicode(static_cast<uint8_t>(ch));
    begin += len;
  }
  return words;
}

}  // namespace ggtrain::tokenizer
