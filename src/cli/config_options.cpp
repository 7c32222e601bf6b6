#include "cli/config_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ggtrain::cli {

void add_config_options(CLI::App* cmd, ConfigOptions& o) {
  cmd->add_option("--config", o.config,
                  "TOML config file (applied over the preset; `ggtrain config show` lists every key)");
  cmd->add_option("--preset", o.preset,
                  fmt::format("Starting point: {} (default s15)", fmt::join(train::preset_names(), ", ")));
  cmd->add_option("--set", o.sets, "Override one key: section.key=value (repeatable)");
}

train::RunConfig resolve_config(const ConfigOptions& o, std::string* note) {
  train::RunConfig c = train::preset(o.preset.empty() ? "s15" : o.preset);
  if (!o.config.empty()) train::apply_toml_file(c, o.config);
  for (const auto& s : o.sets) train::apply_override(c, s);
  const std::string length = train::finetune_length_default(c);
  if (note) *note = length;
  return c;
}

}  // namespace ggtrain::cli
