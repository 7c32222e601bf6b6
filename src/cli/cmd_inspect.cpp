#include <fmt/core.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "gguf/inspect.h"
#include "model/block_recipe.h"
#include "model/config.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {
// Which layers attend, which run a recurrent mixer, which have experts: what
// the per-layer keys say, as ggtrain reads them (model/block_recipe.h).
std::string layer_summary(const gguf::GgufFile& f) {
  try {
    return "layers, as ggtrain runs them:\n" + model::describe_layers(model::config_from_gguf(f));
  } catch (const Error& e) {
    return fmt::format("layers: not read as a model ({})\n", e.what());
  }
}
}  // namespace

Runner add_inspect_command(CLI::App& app) {
  struct Opts {
    std::string file;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("inspect", "List a GGUF file's metadata and tensors");
  cmd->add_option("file", opts->file, "GGUF file")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON document (metadata, tensors)");
  return [cmd, opts]() -> int {
    if (!cmd->parsed()) return -1;
    gguf::GgufFile f(opts->file);
    if (opts->json)
      fmt::print("{}\n", gguf::inspect_json(f).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    else fmt::print("{}{}", gguf::inspect_text(f), layer_summary(f));
    return 0;
  };
}

}  // namespace ggtrain::cli
