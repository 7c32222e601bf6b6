#include <fmt/core.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_options.h"
#include "train/run_data.h"
#include "train/run_folder.h"
#include "util/error.h"

namespace ggtrain::cli {

namespace {

struct Opts {
  ConfigOptions config;
  std::string out;
  bool quiet = false;
};

// What `train --run-dir OUT` would prepare at its start, done ahead: the
// tokenizer (trained into OUT/tokenizer.model when the config brings none)
// and OUT/data. A later `ggtrain train --run-dir OUT` with the same config
// reuses both; an interrupted preparation continues after its last shard.
int run(const Opts& o) {
  const train::RunConfig c = resolve_config(o.config);
  c.validate();
  if (c.data.corpus.empty() && c.data.sources.empty())
    throw ggtrain::Error("config: data.corpus is not set (text or JSONL files, folders or globs)");
  train::create_run_folder(o.out);  // as `train --run-dir` does
  auto tok = train::run_tokenizer(o.out, c, o.quiet, -1);
  train::add_chat_vocabulary(tok, c, o.quiet);  // chat data is tokenized with the template's markers
  // The manifests' counts: opening the shards would map (and check) every
  // token, which a preparation has no need for.
  int64_t train_tokens = 0, val_tokens = 0;
  for (const auto& p : train::prepare_run_data(c, o.out + "/data", tok, false, o.quiet)) {
    train_tokens += p.manifest.train_tokens;
    val_tokens += p.manifest.val_tokens;
  }
  fmt::print("prepared {}/data: {} training and {} validation tokens\n"
             "next: ggtrain train --run-dir {} with the same --preset/--config/--set (it reuses the prepared data)\n",
             o.out, train_tokens, val_tokens, train::shell_word(o.out));
  return 0;
}

}  // namespace

Runner add_data_command(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* data = app.add_subcommand("data", "Corpus preparation");
  auto* prep = data->add_subcommand(
      "prepare", "Tokenize data.corpus into OUT/data (shards + manifest.json) as `train --run-dir OUT` would, "
                 "in bounded memory on all threads; re-run to continue an interrupted preparation");
  add_config_options(prep, o->config);
  prep->add_option("--out,--run-dir", o->out, "The run folder to prepare")->required();
  prep->add_flag("--quiet", o->quiet, "No progress line");
  data->require_subcommand(1);
  return [o, prep] { return prep->parsed() ? run(*o) : -1; };
}

}  // namespace ggtrain::cli
