#pragma once
// llama.cpp's tokenizer_st_partition: the tokens that are matched as whole
// strings (user-defined pieces, and with parse_special the control tokens)
// are cut out of the text before the rest is tokenized.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::tokenizer {

// A token cut out of the text (token >= 0), or text [off, off + len) still
// to tokenize (token -1).
struct Fragment {
  int32_t token;
  size_t off, len;
};

// Spaces to drop next to a cut token (llama.cpp's lstrip / rstrip
// attributes).
struct Strip {
  bool left = false, right = false;
};

// Each of `tokens` in turn (their order is the priority) is cut out of the
// text fragments left by the ones before it, leftmost match first.
// pieces[id] is a token's text; strip(id) says which spaces go with it.
std::vector<Fragment> cut_special_tokens(std::string_view text, std::span<const int32_t> tokens,
                                         const std::vector<std::string>& pieces,
                                         const std::function<Strip(int32_t)>& strip);

}  // namespace ggtrain::tokenizer
