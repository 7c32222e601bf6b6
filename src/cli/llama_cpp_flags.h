#pragma once
// llama.cpp's flags that ggtrain does not take, said as such before the
// parser misreads them (`-ngl 0` would be `-n gl`, `-cnv` `--ctx-size nv`):
// one line on what to do instead.
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::cli {

// `arg` as ggtrain's parser takes it: llama.cpp's multi-letter single-dash
// spellings of flags ggtrain has (-sys, -np) become their long names.
std::string long_spelling(std::string_view arg);

// The message for the first such flag among `args` (argv[1..]), or "".
std::string llama_cpp_flag_message(const std::vector<std::string>& args);

}  // namespace ggtrain::cli
