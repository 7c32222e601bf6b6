#include "cli/token_list.h"

#include <charconv>

#include "util/error.h"

namespace ggtrain::cli {

std::vector<int32_t> parse_token_list(const std::string& csv) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= csv.size()) {
    size_t end = csv.find(',', pos);
    if (end == std::string::npos) end = csv.size();
    int32_t v = 0;
    auto [p, ec] = std::from_chars(csv.data() + pos, csv.data() + end, v);
    if (ec != std::errc() || p != csv.data() + end)
      fail("--tokens: '{}' is not a token id", csv.substr(pos, end - pos));
    ids.push_back(v);
    pos = end + 1;
  }
  return ids;
}

}  // namespace ggtrain::cli
