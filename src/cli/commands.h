#pragma once
// Each subcommand registers its options on the CLI11 app and returns the
// function that runs it. Commands are thin: parsing here, work in the library.
#include <CLI/CLI.hpp>
#include <functional>

namespace ggtrain::cli {

using Runner = std::function<int()>;

Runner add_inspect_command(CLI::App& app);
Runner add_tokenizer_command(CLI::App& app);
Runner add_tokenize_command(CLI::App& app);
Runner add_train_command(CLI::App& app);
Runner add_eval_command(CLI::App& app);
Runner add_imatrix_command(CLI::App& app);
Runner add_generate_command(CLI::App& app);
Runner add_chat_command(CLI::App& app);
Runner add_export_command(CLI::App& app);
Runner add_import_command(CLI::App& app);
Runner add_data_command(CLI::App& app);
Runner add_config_command(CLI::App& app);
Runner add_verify_command(CLI::App& app);
Runner add_serve_command(CLI::App& app);
Runner add_report_command(CLI::App& app);

}  // namespace ggtrain::cli
