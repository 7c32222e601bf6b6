#pragma once
// The flags that say which run config a command works with (train, data
// prepare, config show): a preset, then a TOML file, then --set overrides.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "train/run_config.h"

namespace ggtrain::cli {

struct ConfigOptions {
  std::string config, preset;
  std::vector<std::string> sets;
};

void add_config_options(CLI::App* cmd, ConfigOptions& o);

// The preset (s15 when none is named), the file over it, the overrides
// last, then a finetune's default length (train::finetune_length_default;
// `note`: the line that says so, or "").
train::RunConfig resolve_config(const ConfigOptions& o, std::string* note = nullptr);

}  // namespace ggtrain::cli
