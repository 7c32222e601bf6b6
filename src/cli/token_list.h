#pragma once
// "1,2,3" -> token ids, for the commands that take --tokens.
#include <cstdint>
#include <string>
#include <vector>

namespace ggtrain::cli {

std::vector<int32_t> parse_token_list(const std::string& csv);

}  // namespace ggtrain::cli
