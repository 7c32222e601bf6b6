#include <fmt/core.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "convert/import.h"

namespace ggtrain::cli {

Runner add_import_command(CLI::App& app) {
  struct Opts {
    std::string in, out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("import", "Convert a per-head (toy-from-scratch/v1) checkpoint to a standard llama GGUF");
  cmd->add_option("input", o->in, "Input GGUF (per-head attention, or already fused)")->required();
  cmd->add_option("output", o->out, "Output GGUF")->required();
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    const auto rep = convert::import_checkpoint(o->in, o->out);
    if (rep.fused_tensors > 0)
      fmt::print("fused {} per-head tensors into {} attention weights\n", rep.heads_read, rep.fused_tensors);
    else fmt::print("{} has no per-head tensors: validated and copied\n", o->in);
    if (rep.lens_folded)
      fmt::print("folded lens.proj.weight (donor_dim {}) into token_embd.weight (F32)\n", rep.donor_dim);
    for (const auto& k : rep.dropped_keys) fmt::print("dropped metadata key {}\n", k);
    fmt::print("wrote {} ({} tensors copied unchanged)\n", o->out, rep.copied_tensors);
    return 0;
  };
}

}  // namespace ggtrain::cli
