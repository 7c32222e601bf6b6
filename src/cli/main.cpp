// ggtrain: train Llama models and write GGUF checkpoints llama.cpp loads.
#include <fmt/core.h>

#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"ggtrain: train small Llama models from scratch, checkpoints as GGUF"};
  app.set_version_flag("--version", "ggtrain 0.1.0");
  app.require_subcommand(1);
  std::vector<ggtrain::cli::Runner> runners{
      ggtrain::cli::add_inspect_command(app), ggtrain::cli::add_train_command(app),
      ggtrain::cli::add_eval_command(app), ggtrain::cli::add_generate_command(app), ggtrain::cli::add_chat_command(app),
      ggtrain::cli::add_export_command(app), ggtrain::cli::add_tokenizer_command(app),
      ggtrain::cli::add_tokenize_command(app),
      ggtrain::cli::add_import_command(app), ggtrain::cli::add_data_command(app)};
  // llama.cpp spells the system prompt "-sys"; CLI11 takes no multi-letter
  // single-dash names, so that one spelling is translated before parsing.
  std::vector<std::string> args;
  for (int i = argc - 1; i > 0; --i) args.push_back(std::string_view(argv[i]) == "-sys" ? "--system-prompt" : argv[i]);
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& run : runners) {
      int rc = run();
      if (rc >= 0) return rc;
    }
  } catch (const ggtrain::Error& e) {
    fmt::print(stderr, "ggtrain: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "ggtrain: error: out of memory\n");
    return 1;
  }
  return 0;
}
