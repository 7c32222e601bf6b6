#include "cli/usage_error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

#include "util/suggest.h"

namespace ggtrain::cli {

namespace {

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  return names;
}

// The innermost command the parser entered ("ggtrain data prepare").
CLI::App* innermost(CLI::App& app, std::string* path) {
  CLI::App* at = &app;
  *path = "ggtrain";
  for (;;) {
    const auto parsed = at->get_subcommands();
    if (parsed.empty()) return at;
    at = parsed.front();
    *path += " " + at->get_name();
  }
}

// Every spelling a command takes: its options' names and its subcommands.
std::vector<std::string> names_of(const CLI::App& cmd) {
  std::vector<std::string> names = subcommand_names(cmd);
  for (const CLI::Option* o : cmd.get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// The words of CLI11's "The following argument(s) was/were not expected: a b".
std::vector<std::string> unexpected_words(const std::string& message) {
  std::vector<std::string> words;
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return words;
  std::istringstream in(message.substr(colon + 2));
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The place a message is about, before its colon: nothing for the program
// itself (main's "ggtrain: error: " already names it), "ggtrain data: " for a
// command.
std::string where(const std::string& path) { return path == "ggtrain" ? "" : path + ": "; }

// CLI11's messages start with a capital and some end without a stop;
// ggtrain's error lines are lower case after the prefix.
std::string as_clause(std::string m) {
  if (!m.empty() && m[0] >= 'A' && m[0] <= 'Z' && !(m.size() > 1 && m[1] >= 'A' && m[1] <= 'Z'))
    m[0] = char(m[0] - 'A' + 'a');
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

}  // namespace

std::string unknown_command_message(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty())
    return fmt::format("no command given; ggtrain takes one of: {} (ggtrain --help says what each does)",
                       fmt::join(subcommand_names(app), ", "));
  // Down the command words ("data prepare"), up to the first option or
  // argument of a command that has no subcommands.
  const CLI::App* at = &app;
  std::string path = "ggtrain";
  for (const std::string& word : args) {
    const std::vector<std::string> commands = subcommand_names(*at);
    if (word.empty() || word[0] == '-' || commands.empty()) return "";
    if (std::find(commands.begin(), commands.end(), word) == commands.end())
      return fmt::format("{}unknown command '{}'{}; the commands are: {} ({} --help says what each does)", where(path),
                         word, did_you_mean(word, commands), fmt::join(commands, ", "), path);
    at = at->get_subcommand(word);
    path += " " + word;
  }
  return "";
}

std::string usage_error_message(CLI::App& app, const CLI::ParseError& e) {
  std::string path;
  CLI::App* cmd = innermost(app, &path);
  const std::vector<std::string> commands = subcommand_names(*cmd);
  if (dynamic_cast<const CLI::RequiredError*>(&e) && !commands.empty())
    return fmt::format("{} takes a command: {} ({} --help says what each does)", path, fmt::join(commands, ", "), path);
  std::string message = where(path) + as_clause(e.what());
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // CLI11 lists them last first (it parses a reversed vector).
    std::vector<std::string> words = unexpected_words(e.what());
    std::reverse(words.begin(), words.end());
    message =
        fmt::format("{}unexpected argument{} {}", where(path), words.size() > 1 ? "s" : "", fmt::join(words, " "));
    const std::vector<std::string> known = names_of(*cmd);
    for (const auto& w : words) {
      if (w.empty() || w[0] != '-') continue;
      const std::string near = closest_name(w.substr(0, w.find('=')), known);
      if (!near.empty()) message += fmt::format("; did you mean {} for {}?", near, w);
    }
  }
  return message + fmt::format(" (see {} --help)", path);
}

}  // namespace ggtrain::cli
