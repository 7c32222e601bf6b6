#include "train/finetune.h"

#include <fmt/format.h>

#include <vector>

#include "model/config.h"
#include "util/error.h"

namespace ggtrain::train {

void adopt_model_of(RunConfig& c, const gguf::GgufFile& f) {
  const model::Config from = model::config_from_gguf(f);
  std::vector<std::string> diffs;
  for (const auto& field : model::config_fields()) {
    const std::string key = std::string("model.") + field.name;
    // GGUF stores the doubles as f32: compared at that precision.
    if (c.set_keys.count(key) && !model::same_field(c.model, from, field, /*as_f32=*/true))
      diffs.push_back(fmt::format("{} = {} but the model has {}", key, model::field_text(c.model, field),
                                  model::field_text(from, field)));
  }
  if (!diffs.empty())
    fail("{}: init.from decides the model, and the config contradicts it: {} (leave model.* unset)", f.path(),
         fmt::join(diffs, "; "));
  model::copy_fields(c.model, from);
}

void adopt_file_only_parts_of(RunConfig& c, const gguf::GgufFile& f) {
  model::copy_file_parts(c.model, model::config_from_gguf(f));
}

}  // namespace ggtrain::train
