#include <fmt/core.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "train/run_data.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {

struct Opts {
  std::string config, preset, out;
  std::vector<std::string> sets;
  bool quiet = false;
};

// What `train --run-dir OUT` would prepare at its start, done ahead: the
// tokenizer (trained into OUT/tokenizer.model when the config brings none)
// and OUT/data. A later `ggtrain train --run-dir OUT` with the same config
// reuses both; an interrupted preparation continues after its last shard.
int run(const Opts& o) {
  auto c = train::preset(o.preset.empty() ? "s15" : o.preset);
  if (!o.config.empty()) train::apply_toml_file(c, o.config);
  for (const auto& s : o.sets) train::apply_override(c, s);
  c.validate();
  if (c.data.corpus.empty() && c.data.sources.empty())
    throw ggtrain::Error("config: data.corpus is not set (text or JSONL files, folders or globs)");
  const auto tok = train::run_tokenizer(o.out, c, o.quiet, -1);
  // The manifests' counts: opening the shards would map (and check) every
  // token, which a preparation has no need for.
  int64_t train_tokens = 0, val_tokens = 0;
  for (const auto& p : train::prepare_run_data(c, o.out + "/data", tok, false, o.quiet)) {
    train_tokens += p.manifest.train_tokens;
    val_tokens += p.manifest.val_tokens;
  }
  fmt::print("prepared {}/data: {} training and {} validation tokens\n", o.out, train_tokens, val_tokens);
  return 0;
}

}  // namespace

Runner add_data_command(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* data = app.add_subcommand("data", "Corpus preparation");
  auto* prep = data->add_subcommand(
      "prepare", "Tokenize data.corpus into OUT/data (shards + manifest.json) as `train --run-dir OUT` would, "
                 "in bounded memory on all threads; re-run to continue an interrupted preparation");
  prep->add_option("--config", o->config, "TOML config file (applied over the preset)");
  prep->add_option("--preset", o->preset, "Starting point: tiny, s15 (default), smol135");
  prep->add_option("--set", o->sets, "Override one key: section.key=value (repeatable)");
  prep->add_option("--out,--run-dir", o->out, "The run folder to prepare")->required();
  prep->add_flag("--quiet", o->quiet, "No progress line");
  data->require_subcommand(1);
  return [o, prep] { return prep->parsed() ? run(*o) : -1; };
}

}  // namespace ggtrain::cli
