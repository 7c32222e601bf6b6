// ggtrain: train small language models and write GGUF checkpoints llama.cpp loads.
#include <fmt/core.h>

#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/llama_cpp_flags.h"
#include "cli/usage_error.h"
#include "kernels/onednn.h"
#include "util/cpu_level.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"ggtrain: train small language models from scratch or finetune a GGUF; every checkpoint a GGUF that "
               "llama.cpp, ollama and LM Studio load",
               "ggtrain"};
  app.set_version_flag("--version", [] {
    return fmt::format("ggtrain 0.1.0, CPU level {} ({}), oneDNN ISA {}", ggtrain::built_cpu_level(),
                       ggtrain::built_cpu_description(), ggtrain::kernels::onednn_isa());
  });
  app.require_subcommand(1);
  std::vector<ggtrain::cli::Runner> runners{
      ggtrain::cli::add_train_command(app),    ggtrain::cli::add_generate_command(app),
      ggtrain::cli::add_chat_command(app),     ggtrain::cli::add_eval_command(app),
      ggtrain::cli::add_export_command(app),   ggtrain::cli::add_config_command(app),
      ggtrain::cli::add_data_command(app),     ggtrain::cli::add_tokenizer_command(app),
      ggtrain::cli::add_tokenize_command(app), ggtrain::cli::add_inspect_command(app),
      ggtrain::cli::add_import_command(app),   ggtrain::cli::add_verify_command(app),
      ggtrain::cli::add_imatrix_command(app),  ggtrain::cli::add_serve_command(app),
      ggtrain::cli::add_report_command(app)};
  std::vector<std::string> typed;
  for (int i = 1; i < argc; ++i) typed.push_back(ggtrain::cli::long_spelling(argv[i]));
  if (const std::string m = ggtrain::cli::unknown_command_message(app, typed); !m.empty()) {
    fmt::print(stderr, "ggtrain: error: {}\n", m);
    return ggtrain::cli::kUsageExitCode;
  }
  if (const std::string m = ggtrain::cli::llama_cpp_flag_message(typed); !m.empty()) {
    fmt::print(stderr, "ggtrain: error: {}\n", m);
    return ggtrain::cli::kUsageExitCode;
  }
  try {
    app.parse(std::vector<std::string>(typed.rbegin(), typed.rend()));  // CLI11 takes them last first
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "ggtrain: error: {}\n", ggtrain::cli::usage_error_message(app, e));
    return ggtrain::cli::kUsageExitCode;
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
