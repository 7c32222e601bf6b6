#include "train/finetune.h"

#include <fmt/format.h>

#include <vector>

#include "model/config.h"
#include "util/error.h"

namespace ggtrain::train {

void adopt_model_of(RunConfig& c, const gguf::GgufFile& f) {
  const model::LlamaConfig m = model::config_from_llama_gguf(f);
  ModelSection from;
  from.d_model = m.d_model;
  from.n_layers = m.n_layers;
  from.n_heads = m.n_heads;
  from.n_kv_heads = m.n_kv_heads;
  from.d_ff = m.d_ff;
  from.ctx = m.ctx;
  from.tied = m.tied;
  from.rope_freq_base = m.rope_freq_base;
  from.rms_eps = m.rms_eps;
  std::vector<std::string> diffs;
  auto check = [&](const char* key, auto mine, auto theirs) {
    if (c.set_keys.count(key) && mine != theirs)
      diffs.push_back(fmt::format("{} = {} but the model has {}", key, mine, theirs));
  };
  check("model.d_model", c.model.d_model, from.d_model);
  check("model.n_layers", c.model.n_layers, from.n_layers);
  check("model.n_heads", c.model.n_heads, from.n_heads);
  check("model.n_kv_heads", c.model.n_kv_heads, from.n_kv_heads);
  check("model.d_ff", c.model.d_ff, from.d_ff);
  check("model.ctx", c.model.ctx, from.ctx);
  check("model.tied", c.model.tied, from.tied);
  // GGUF stores these as f32: compare at that precision.
  check("model.rope_freq_base", float(c.model.rope_freq_base), float(from.rope_freq_base));
  check("model.rms_eps", float(c.model.rms_eps), float(from.rms_eps));
  if (!diffs.empty())
    fail("{}: init.from decides the model, and the config contradicts it: {} (leave model.* unset)",
         f.path(), fmt::join(diffs, "; "));
  c.model = from;
}

}  // namespace ggtrain::train
