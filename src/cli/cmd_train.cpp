#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_options.h"
#include "cli/inference_model.h"
#include "corpus/prepare/manifest.h"
#include "corpus/token_file.h"
#include "dashboard/dashboard.h"
#include "gguf/reader.h"
#include "infer/imatrix.h"
#include "model/config.h"
#include "parallel/distributed.h"
#include "quant/importance_matrix.h"
#include "train/best_checkpoint.h"
#include "train/run_checkpoint.h"
#include "train/run_folder.h"
#include "train/trainer.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {

struct Opts {
  ConfigOptions config;
  std::string run_dir = "runs/default";
  bool resume = false, quiet = false;
  int64_t stop_at = 0;
};

// checkpoint.imatrix: llama-imatrix's statistics of the final weights (a
// LoRA run's adapter applied to its base) over the validation tokens, in
// chunks of 512 tokens or the model's context if shorter, at most
// kImatrixChunks of them (~100k tokens: the size of the calibration texts
// imatrix files are usually made from; more costs time and changes little).
constexpr int64_t kImatrixChunks = 200;
void write_run_imatrix(const std::string& run_dir, const train::RunConfig& c, const train::TrainSummary& sum) {
  const auto manifest = corpus::read_manifest(run_dir + "/data");
  const auto shards = manifest ? manifest->val_paths(run_dir + "/data") : std::vector<std::string>{};
  if (shards.empty()) {
    fmt::print(stderr,
               "warning: checkpoint.imatrix: {}/data holds no validation tokens (data.val_fraction = 0?); "
               "no imatrix.gguf written\n",
               run_dir);
    return;
  }
  const corpus::TokenStream val(shards);
  std::vector<int32_t> tokens(size_t(val.size()));
  val.read(0, val.size(), tokens.data());
  InferenceOptions io;
  const bool lora = c.train.lora.rank > 0;
  io.model = lora ? c.init.from : sum.final_weights;
  if (lora) io.lora.path = sum.final_weights;
  io.ctx = std::min<int64_t>(512, model::config_from_gguf(gguf::GgufFile(io.model)).ctx);
  InferenceModel m(io);
  const auto r = infer::collect_imatrix(m.decoder, tokens, io.ctx, chunk_bos(m.tokenizer), kImatrixChunks, false,
                                        val.describe(), {});
  const std::string out = run_dir + "/imatrix.gguf";
  quant::write_importance_matrix(r.matrix, out);
  fmt::print("wrote {}: {} matrices over {} chunks of {} validation tokens (export --imatrix {})\n", out,
             r.matrix.entries.size(), r.matrix.chunk_count, r.matrix.chunk_size, out);
}

// What a finished run wrote and the commands a user runs next.
void print_outcome(const train::TrainSummary& sum, const Opts& o, const train::RunConfig& c) {
  const bool lora = c.train.lora.rank > 0, chat = c.data.format != train::DataFormat::kText;
  const std::string val = std::isfinite(sum.last_val_loss) ? fmt::format("{:.4f}", sum.last_val_loss) : "n/a";
  fmt::print("trained steps {}..{}: loss {:.4f} -> {:.4f}, validation loss {}, {:.0f} tokens/s\n", sum.first_step,
             sum.last_step, sum.first_loss, sum.last_loss, val, sum.tokens_per_s);
  if (sum.nonfinite_steps > 0)
    fmt::print("skipped {} steps whose loss or gradient norm was not finite (train.on_nonfinite = \"skip\")\n",
               sum.nonfinite_steps);
  const std::string dir = train::shell_word(o.run_dir), w = train::shell_word(sum.final_weights);
  fmt::print("wrote {} ({} {}), {}/metrics.jsonl, the loss plot {}/loss.svg and the report {}/report.html\n",
             sum.final_weights, lora ? "a LoRA adapter" : "a GGUF model",
             lora ? "for its base model" : "llama.cpp loads as it is", dir, dir, dir);
  if (const auto best = train::read_best(o.run_dir))  // checkpoint.keep_best
    fmt::print("best {}: {:.4f} at step {}: {}/weights/best.gguf\n", best->metric, best->value, best->step, dir);
  if (sum.last_step < sum.planned_steps) {
    fmt::print("next: ggtrain train --resume --run-dir {}   (continues to step {})\n", dir, sum.planned_steps);
    return;
  }
  if (lora) {
    const std::string base = train::shell_word(c.init.from);
    fmt::print("next: ggtrain {} -m {} --lora {}\n"
               "      ggtrain export --merge-lora {} {} merged.gguf --type q8_0\n",
               chat ? "chat" : "generate", base, w, base, w);
    return;
  }
  if (chat) fmt::print("next: ggtrain chat -m {}\n", w);
  else fmt::print("next: ggtrain generate -m {} -p \"Once upon a time\"\n", w);
  fmt::print("      ggtrain eval -m {} --text FILE\n"
             "      ggtrain export {} model-q8_0.gguf --type q8_0 --ollama\n",
             w, w);
}

// A resumed run that already reached train.steps has nothing to train:
// say so (and how to go on) instead of an empty summary.
// Every rank reads the folder and returns alike; rank 0 speaks.
bool report_if_finished(const Opts& o, const train::RunConfig& c) {
  const int64_t at = train::latest_step(o.run_dir);
  if (at < c.train.steps) return false;
  if (parallel::world().root())
    fmt::print("{}: already trained to step {} of train.steps = {}; nothing to do\n"
               "final weights: {}\n"
               "to train further: ggtrain train --resume --run-dir {} --set train.steps=N (N > {})\n",
               o.run_dir, at, c.train.steps, train::weights_path(o.run_dir, at), train::shell_word(o.run_dir), at);
  return true;
}

int run(const Opts& o) {
  train::TrainOptions opts;
  opts.run_dir = o.run_dir;
  opts.resume = o.resume;
  opts.quiet = o.quiet;
  opts.stop_at = o.stop_at;
  if (o.resume) {
    if (!o.config.config.empty() || !o.config.preset.empty())
      throw ggtrain::Error("--resume uses the run's saved config; only --set overrides are allowed");
    opts.config = train::saved_run_config(o.run_dir);
    for (const auto& s : o.config.sets) train::apply_override(opts.config, s);
    if (report_if_finished(o, opts.config)) return 0;
  } else {
    std::string length;
    opts.config = resolve_config(o.config, &length);
    if (!length.empty() && !o.quiet && parallel::world().root()) fmt::print(stderr, "{}\n", length);
  }
  auto sum = train::run_training(opts);
  // A run a signal stopped exits as a process that signal ended would
  // (128 + SIGINT = 130, + SIGTERM = 143), after its checkpoint, so that
  // `train && export` does not ship a half-trained model; --stop-at
  // asked for its stop and exits 0.
  const int status = sum.interrupted_by != 0 ? 128 + sum.interrupted_by : 0;
  if (!parallel::world().root()) return status;  // under mpirun rank 0 alone reports
  if (opts.config.checkpoint.imatrix && sum.last_step >= opts.config.train.steps)
    write_run_imatrix(o.run_dir, opts.config, sum);
  try {
    dashboard::write_run_report(o.run_dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "warning: {}/report.html not written: {}\n", o.run_dir, e.what());
  }
  print_outcome(sum, o, opts.config);
  return status;
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "train", parallel::built_with_mpi()
                   ? "Train a model; checkpoints go to RUN_DIR/weights. `mpirun -np N ggtrain train ...` "
                     "trains data-parallel on N ranks (train.batch is the global micro-batch)"
                   : "Train a model; checkpoints go to RUN_DIR/weights. This ggtrain was built without "
                     "MPI: one process only (install libopenmpi-dev and rebuild for mpirun)");
  add_config_options(cmd, o->config);
  cmd->add_option("--run-dir", o->run_dir, "Run folder (default runs/default)");
  cmd->add_flag("--resume", o->resume, "Continue the run in --run-dir from its latest checkpoint");
  cmd->add_flag("--quiet", o->quiet, "No progress output");
  cmd->add_option("--stop-at", o->stop_at, "Exit after this step with a checkpoint (resume later with --resume)");
  cmd->footer(
      "Config keys (model.*, data.*, train.*, checkpoint.*, init.*): `ggtrain config show [--preset P]` prints "
      "every key with its value and what it does.\nExample: ggtrain train --preset tiny --set data.corpus=my.txt "
      "--run-dir runs/mine");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    return train::on_every_rank([&] { return run(*o); });
  };
}

}  // namespace ggtrain::cli
