#include "cli/llama_cpp_flags.h"

#include <fmt/format.h>

#include <array>
#include <string_view>
#include <utility>

namespace ggtrain::cli {

namespace {

struct ForeignFlag {
  std::string_view spelling;  // as llama.cpp's tools take it
  std::string_view instead;  // what to do in ggtrain
};

constexpr std::array kForeignFlags = {
    ForeignFlag{"-ngl", "ggtrain runs on the CPU; leave it out"},
    ForeignFlag{"--gpu-layers", "ggtrain runs on the CPU; leave it out"},
    ForeignFlag{"--n-gpu-layers", "ggtrain runs on the CPU; leave it out"},
    ForeignFlag{"-cnv", "for a conversation use `ggtrain chat -m MODEL`"},
    ForeignFlag{"--conversation", "for a conversation use `ggtrain chat -m MODEL`"},
    ForeignFlag{"--jinja", "ggtrain applies the model's own chat template; leave it out"},
    ForeignFlag{"--hellaswag", "use `ggtrain eval -m MODEL --task FILE --task-format hellaswag`"},
    ForeignFlag{"--winogrande", "use `ggtrain eval -m MODEL --task FILE --task-format winogrande`"},
    ForeignFlag{"--multiple-choice", "use `ggtrain eval -m MODEL --task FILE --task-format multiple-choice`"},
    ForeignFlag{"--temperature", "the flag is --temp, as in llama.cpp"},
};

}  // namespace

// CLI11 takes no multi-letter single-dash names; these llama.cpp spellings
// are translated before parsing.
std::string long_spelling(std::string_view arg) {
  constexpr std::array<std::pair<std::string_view, std::string_view>, 2> kSpellings = {{
      {"-sys", "--system-prompt"},
      {"-np", "--parallel"},
  }};
  for (const auto& [short_name, long_name] : kSpellings)
    if (arg == short_name) return std::string(long_name);
  return std::string(arg);
}

std::string llama_cpp_flag_message(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    const std::string_view flag = std::string_view(a).substr(0, a.find('='));
    for (const ForeignFlag& f : kForeignFlags)
      if (flag == f.spelling)
        return fmt::format("{} is a llama.cpp flag ggtrain does not take: {}", f.spelling, f.instead);
  }
  return "";
}

}  // namespace ggtrain::cli
