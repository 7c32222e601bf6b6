#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "gguf/convert.h"
#include "model/export.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_export_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    std::string type;
    bool ollama = false, merge_lora = false;
    double lora_scale = 1.0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "export", "Convert a llama GGUF to F32, F16, BF16 or Q8_0 weights, or merge a LoRA adapter into its base");
  cmd->add_option("files", o->files, "IN.gguf OUT.gguf, or with --merge-lora BASE.gguf ADAPTER.gguf OUT.gguf")
      ->required()
      ->expected(2, 3);
  cmd->add_option("--type", o->type, "f32, f16, bf16 or q8_0 (default f16; f32 with --merge-lora)");
  cmd->add_flag("--merge-lora", o->merge_lora, "Merge ADAPTER (a LoRA GGUF) into BASE: a standard model");
  cmd->add_option("--lora-scale", o->lora_scale, "With --merge-lora: the adapter's scale (default 1)");
  cmd->add_flag("--ollama", o->ollama, "Also write a Modelfile beside the output for `ollama create`");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    if (o->files.size() != (o->merge_lora ? 3u : 2u))
      fail("export: expected {} (got {} files)", o->merge_lora ? "BASE.gguf ADAPTER.gguf OUT.gguf with --merge-lora"
                                                                : "IN.gguf OUT.gguf", o->files.size());
    const std::string type_name = o->type.empty() ? (o->merge_lora ? "f32" : "f16") : o->type;
    auto type = gguf::type_from_name(type_name);
    if (!type || !gguf::is_float_convertible(*type))
      fail("export: --type {} is not one of f32, f16, bf16, q8_0", type_name);
    const std::string& out = o->files.back();
    if (o->merge_lora)
      model::merge_lora_model(o->files[0], o->files[1], o->lora_scale, out, *type);
    else
      model::export_model(o->files[0], out, *type);
    fmt::print("wrote {} ({} weights, {} bytes)\n", out, gguf::type_name(*type), std::filesystem::file_size(out));
    if (o->ollama) {
      const std::string mf = model::write_ollama_modelfile(out);
      fmt::print("wrote {}: ollama create NAME -f {}\n", mf, mf);
    }
    return 0;
  };
}

}  // namespace ggtrain::cli
