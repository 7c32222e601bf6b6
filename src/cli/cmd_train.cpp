#include <fmt/core.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "train/distributed.h"
#include "train/trainer.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {

struct Opts {
  std::string config, preset, run_dir = "runs/default";
  std::vector<std::string> sets;
  bool resume = false, quiet = false;
  int64_t stop_at = 0;
};

int run(const Opts& o) {
  train::TrainOptions opts;
  opts.run_dir = o.run_dir;
  opts.resume = o.resume;
  opts.quiet = o.quiet;
  opts.stop_at = o.stop_at;
  if (o.resume) {
    if (!o.config.empty() || !o.preset.empty())
      throw ggtrain::Error("--resume uses the run's saved config; only --set overrides are allowed");
    opts.config = train::saved_run_config(o.run_dir);
  } else {
    opts.config = train::preset(o.preset.empty() ? "s15" : o.preset);
    if (!o.config.empty()) train::apply_toml_file(opts.config, o.config);
  }
  for (const auto& s : o.sets) train::apply_override(opts.config, s);
  auto sum = train::run_training(opts);
  if (!train::world().root()) return 0;  // under mpirun rank 0 alone reports
  const std::string val = std::isfinite(sum.last_val_loss) ? fmt::format("{:.4f}", sum.last_val_loss) : "n/a";
  fmt::print("trained steps {}..{}: loss {:.4f} -> {:.4f}, validation loss {}, {:.0f} tokens/s\n"
             "final weights: {}\n",
             sum.first_step, sum.last_step, sum.first_loss, sum.last_loss, val, sum.tokens_per_s, sum.final_weights);
  if (sum.nonfinite_steps > 0)
    fmt::print("skipped {} steps whose loss or gradient norm was not finite (train.on_nonfinite = \"skip\")\n",
               sum.nonfinite_steps);
  return 0;
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "train", train::built_with_mpi()
                   ? "Train a model; checkpoints go to RUN_DIR/weights. `mpirun -np N ggtrain train ...` "
                     "trains data-parallel on N ranks (train.batch is the global micro-batch)"
                   : "Train a model; checkpoints go to RUN_DIR/weights. This ggtrain was built without "
                     "MPI: one process only (install libopenmpi-dev and rebuild for mpirun)");
  cmd->add_option("--config", o->config, "TOML config file (applied over the preset)");
  cmd->add_option("--preset", o->preset, "Starting point: tiny, s15 (default), smol135");
  cmd->add_option("--set", o->sets, "Override one key: section.key=value (repeatable)");
  cmd->add_option("--run-dir", o->run_dir, "Run folder (default runs/default)");
  cmd->add_flag("--resume", o->resume, "Continue the run in --run-dir from its latest checkpoint");
  cmd->add_flag("--quiet", o->quiet, "No progress output");
  cmd->add_option("--stop-at", o->stop_at,
                  "Exit after this step with a checkpoint (resume later with --resume)");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    try {
      const int rc = run(*o);
      if (train::world_started()) train::world().finalize();
      return rc;
    } catch (const std::exception& e) {
      const std::string message = train::failure_message(e);
      train::end_every_rank(message);
      if (train::world_started()) train::world().finalize();
      if (dynamic_cast<const ggtrain::Error*>(&e) || dynamic_cast<const std::bad_alloc*>(&e)) throw;
      // A library's own exception must still end in a message and a
      // non-zero exit, never in std::terminate.
      throw ggtrain::Error(message);
    }
  };
}

}  // namespace ggtrain::cli
