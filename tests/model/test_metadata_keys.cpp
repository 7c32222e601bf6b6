// model/metadata_keys: the one table of "<arch>.*" keys. Every family's
// config, at values no default matches, written and read back through the
// table is the same config; every key a file gets is a row of the table;
// and no row is named twice.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/architecture.h"
#include "model/checkpoint.h"
#include "model/metadata_keys.h"
#include "support/family_shapes.h"
#include "support/temp_dir.h"
#include "support/tiny_llama.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

// Each family's small config with every hyper-parameter its files carry off
// its default (and off llama.cpp's), so a key written but not read, or read
// under another name, changes a field.
model::Config unusual_config(const model::Architecture& row) {
  model::Config c = test_support::tiny_llama(40);
  c.arch = row.name;
  c.ctx = 77;
  c.d_ff = 52;
  c.rope_freq_base = 12345.0;
  c.rms_eps = 3e-6;
  test_support::shape_family_layers(c);
  if (row.partial_rope && row.recurrent_mixer != model::Mixer::kGatedDeltaNet) c.rope_dim = c.d_head() / 2;
  if (row.default_swa_pattern != 0) {
    c.sliding_window = 5;
    c.swa_pattern = row.default_swa_pattern + 1;
    c.rope_freq_base_swa = 2500.0;
    c.rope_scaling_factor = 2.0;
  }
  if (row.writes_head_size || row.name == std::string("qwen3")) c.head_dim = 12;  // heads of their own size
  if (row.qk_norm_whole) c.head_dim = 0;
  c.validate("test");
  return c;
}

}  // namespace

TEST(MetadataKeys, EveryFamilyReadsBackWhatItWrote) {
  TempDir tmp;
  for (const auto& row : model::architectures()) {
    SCOPED_TRACE(row.name);
    const model::Config c = unusual_config(row);
    const model::ParamLayout layout(c);
    const std::vector<float> params(size_t(layout.total()), 0.25f);
    gguf::GgufWriter w;
    model::add_model_tensors(w, c, layout, params.data());
    const std::string path = tmp / (std::string(row.name) + ".gguf");
    w.write(path);
    const gguf::GgufFile f(path);
    const model::Config back = model::config_from_gguf(f);
    for (const auto& field : model::config_fields())
      EXPECT_TRUE(model::same_field(back, c, field, true))
          << field.name << ": wrote " << model::field_text(c, field) << ", read " << model::field_text(back, field);
    // Every "<arch>." key of the file is a row of the table.
    std::set<std::string> rows;
    for (const auto& k : model::metadata_keys()) rows.insert(c.key(k.name));
    for (const auto& [key, value] : f.metadata()) {
      if (key.rfind(c.arch + ".", 0) == 0) {
        EXPECT_TRUE(rows.count(key)) << key << " is written but no row names it";
      }
    }
  }
}

TEST(MetadataKeys, EveryKeyIsNamedOnce) {
  std::set<std::string> names;
  for (const auto& k : model::metadata_keys()) EXPECT_TRUE(names.insert(k.name).second) << k.name;
}
