// `ggtrain config show`: the resolved run config, every key with a line on
// what it does, as a TOML file that `train --config` reads back.
#include <fmt/core.h>

#include <memory>

#include "cli/commands.h"
#include "cli/config_options.h"
#include "gguf/reader.h"
#include "train/finetune.h"
#include "train/run_config.h"
#include "train/trainer.h"
#include "util/error.h"

namespace ggtrain::cli {

Runner add_config_command(CLI::App& app) {
  struct Opts {
    ConfigOptions config;
    std::string run_dir;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("config", "Run configs: every key, its value and what it does");
  cmd->require_subcommand(1);
  auto* show =
      cmd->add_subcommand("show", "Print the resolved config (preset, --config, --set; or a run's saved one) as TOML, "
                                  "each key with a comment; save it, edit it, pass it to `train --config`");
  add_config_options(show, o->config);
  show->add_option("--run-dir", o->run_dir, "Show the config a run folder trains with (what --resume uses)")
      ->excludes("--config")
      ->excludes("--preset");
  return [show, o]() -> int {
    if (!show->parsed()) return -1;
    train::RunConfig c;
    if (o->run_dir.empty()) {
      c = resolve_config(o->config);
      // As `train` will: the model section is init.from's, not the preset's.
      if (!c.init.from.empty()) {
        try {
          train::adopt_model_of(c, gguf::GgufFile(c.init.from));
        } catch (const Error& e) {
          fail("{} (init.from)", e.what());
        }
      }
    } else {
      c = train::saved_run_config(o->run_dir);
      for (const auto& s : o->config.sets) train::apply_override(c, s);
    }
    c.validate();
    const std::string origin = o->run_dir.empty()
                                   ? fmt::format("preset {}", o->config.preset.empty() ? "s15" : o->config.preset)
                                   : "run " + o->run_dir;
    fmt::print("# ggtrain run config ({}{}{}{}); `ggtrain train --config FILE` reads this back\n", origin,
               o->config.config.empty() ? "" : ", " + o->config.config, o->config.sets.empty() ? "" : ", with --set",
               o->run_dir.empty() && !c.init.from.empty() ? ", model from " + c.init.from : "");
    fmt::print("{}", train::to_toml_documented(c));
    return 0;
  };
}

}  // namespace ggtrain::cli
