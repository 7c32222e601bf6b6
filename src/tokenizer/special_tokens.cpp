#include "tokenizer/special_tokens.h"

namespace ggtrain::tokenizer {

namespace {

bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }  // C isspace

}  // namespace

std::vector<Fragment> cut_special_tokens(std::string_view text, std::span<const int32_t> tokens,
                                         const std::vector<std::string>& pieces,
                                         const std::function<Strip(int32_t)>& strip) {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (int32_t id : tokens) {
    const std::string& p = pieces[size_t(id)];
    const Strip s = strip(id);
    std::vector<Fragment> next;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.off;
      const size_t end = f.off + f.len;
      for (size_t m; pos < end && (m = text.substr(0, end).find(p, pos)) != std::string_view::npos;) {
        size_t left_end = m;
        if (s.left)
          while (left_end > pos && is_space(text[left_end - 1])) --left_end;
        if (left_end > pos) next.push_back({-1, pos, left_end - pos});
        next.push_back({id, 0, 0});
        pos = m + p.size();
        if (s.right)
          while (pos < end && is_space(text[pos])) ++pos;
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags = std::move(next);
  }
  return frags;
}

}  // namespace ggtrain::tokenizer
