#pragma once
// The merge loop that llama.cpp's SPM and BPE tokenizer sessions share
// (llm_tokenizer_spm_session, llm_tokenizer_bpe_session): split the text
// into UTF-8 characters, then keep merging the adjacent pair ranked best
// until no adjacent pair has a rank. The two vocabularies differ only in how
// a pair is ranked: SPM by the score of the merged piece, BPE by the rank of
// the merge rule.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace ggtrain::tokenizer {

// llama.cpp's unicode_len_utf8: the sequence length announced by a lead byte
// (stray continuation bytes count as 1, exactly as llama.cpp splits them).
inline size_t utf8_len(char c) {
  static constexpr size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[static_cast<uint8_t>(c) >> 4];
}

// rank(left, right) -> std::optional<P>: the pair's priority, higher merges
// first (ties: the leftmost pair), or nullopt when the two do not merge.
// emit(piece) is called with the final pieces, left to right.
template <typename Rank, typename Emit>
void merge_bigrams(std::string_view text, Rank rank, Emit emit) {
  struct Symbol {
    int prev, next;
    size_t off, n;  // bytes of text
  };
  using P = typename decltype(rank(text, text))::value_type;
  struct Bigram {
    int left, right;
    P priority;
    size_t size;
  };
  struct Order {
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.priority < r.priority || (l.priority == r.priority && l.left > r.left);
    }
  };

  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_len(text[off]), text.size() - off);
    const int index = static_cast<int>(sym.size());
    sym.push_back({index - 1, off + n == text.size() ? -1 : index + 1, off, n});
    off += n;
  }
  auto piece = [&](const Symbol& s) { return text.substr(s.off, s.n); };
  std::priority_queue<Bigram, std::vector<Bigram>, Order> queue;
  auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    if (const std::optional<P> p = rank(piece(sym[size_t(left)]), piece(sym[size_t(right)])))
      queue.push({left, right, *p, sym[size_t(left)].n + sym[size_t(right)].n});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[size_t(b.left)];
    Symbol& r = sym[size_t(b.right)];
    // Stale: one side was merged away or grew since the pair was queued
    // (llama.cpp compares the texts; for adjacent symbols that only grow,
    // equal sizes mean equal texts).
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[size_t(i)].next) emit(piece(sym[size_t(i)]));
}

}  // namespace ggtrain::tokenizer
