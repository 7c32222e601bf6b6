#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "gguf/convert.h"
#include "model/export.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_export_command(CLI::App& app) {
  struct Opts {
    std::string in, out, type = "f16";
    bool ollama = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("export", "Convert a llama GGUF to F32, F16, BF16 or Q8_0 weights");
  cmd->add_option("input", o->in, "Input GGUF")->required();
  cmd->add_option("output", o->out, "Output GGUF")->required();
  cmd->add_option("--type", o->type, "f32, f16, bf16 or q8_0 (default f16)");
  cmd->add_flag("--ollama", o->ollama, "Also write a Modelfile beside the output for `ollama create`");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    auto type = gguf::type_from_name(o->type);
    if (!type || !gguf::is_float_convertible(*type))
      fail("export: --type {} is not one of f32, f16, bf16, q8_0", o->type);
    model::export_model(o->in, o->out, *type);
    fmt::print("wrote {} ({} weights, {} bytes)\n", o->out, gguf::type_name(*type),
               std::filesystem::file_size(o->out));
    if (o->ollama) {
      const std::string mf = model::write_ollama_modelfile(o->out);
      fmt::print("wrote {}: ollama create NAME -f {}\n", mf, mf);
    }
    return 0;
  };
}

}  // namespace ggtrain::cli
