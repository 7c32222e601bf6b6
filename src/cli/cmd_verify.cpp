#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "train/run_checkpoint.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_verify_command(CLI::App& app) {
  auto run_dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("verify",
                                 "Check a run folder's checkpoints without training: each weights + state pair "
                                 "readable, of its step and run, and with the SHA-256 digests recorded at write time");
  cmd->add_option("run_dir", *run_dir, "The run folder (RUN_DIR of `ggtrain train --run-dir RUN_DIR`)")->required();
  return [cmd, run_dir]() -> int {
    if (!cmd->parsed()) return -1;
    const auto checks = train::verify_checkpoints(*run_dir);
    if (checks.empty()) fail("{}: no checkpoints (weights/step_N.gguf) to verify", *run_dir);
    int bad = 0;
    for (const auto& c : checks) {
      if (!c.problem.empty()) ++bad;
      fmt::print("step {}: {}\n", c.step,
                 !c.problem.empty() ? "DAMAGED: " + c.problem
                 : c.has_digests    ? std::string("intact (weights and AdamW moments match their SHA-256 digests)")
                                    : std::string("readable; no digests to check (written by an earlier ggtrain)"));
    }
    const int64_t latest = train::latest_step(*run_dir);
    const bool latest_ok =
        std::any_of(checks.begin(), checks.end(), [&](const auto& c) { return c.step == latest && c.problem.empty(); });
    fmt::print("{}: {} of {} checkpoints intact; weights/latest {}\n", *run_dir, checks.size() - size_t(bad),
               checks.size(),
               latest < 0  ? std::string("is missing")
               : latest_ok ? fmt::format("-> step {}, which resumes", latest)
                           : fmt::format("-> step {}, which is damaged: --resume would refuse it", latest));
    return bad == 0 && latest_ok ? 0 : 1;
  };
}

}  // namespace ggtrain::cli
