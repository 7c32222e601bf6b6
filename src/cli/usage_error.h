#pragma once
// How ggtrain reports a command line it cannot parse: one line
// "ggtrain: error: ..." (with a "did you mean" where a name is close to a
// known one) and the help to read, exit code 2, as the Unix tools and
// llama.cpp's argument parser do. Errors while running exit with 1.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace ggtrain::cli {

constexpr int kUsageExitCode = 2;

// args as the user typed them (argv[1..]). Returns the message for a first
// word that is no command ("" when it is one, or an option).
std::string unknown_command_message(const CLI::App& app, const std::vector<std::string>& args);

// The message for a CLI11 parse error (not help or version), naming the
// command whose options were being read.
std::string usage_error_message(CLI::App& app, const CLI::ParseError& e);

}  // namespace ggtrain::cli
