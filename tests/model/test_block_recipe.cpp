// Each family's block recipe against the graphs llama.cpp builds for it
// (src/models/<arch>.cpp in its source): which mixer and feed-forward each
// layer runs, which norm tensors feed them, and which families norm a
// sublayer's output before the residual add. The training passes and the
// decoder both walk this recipe, so a wrong row here is wrong in both
// (the layout takes its norms' names from it too; llama.cpp reading what
// ggtrain writes is tested elsewhere).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/block_recipe.h"
#include "model/config.h"
#include "support/family_shapes.h"
#include "support/random_model.h"

using namespace ggtrain;

namespace {

struct Expected {
  const char* arch;
  std::vector<std::string> layers;  // describe() of layers 0, 1, 2, 3
  const char* ffn_norm;  // the feed-forward half's input norm
};

// Layers 0, 2, 3 of lfm2 and the Qwen3.5 families are recurrent
// (attention_layers "1", as a GGUF's per-layer kinds would mark them).
const Expected kExpected[] = {
    {"llama", {"attention + dense_ffn"}, "ffn_norm"},
    {"qwen2", {"attention + dense_ffn"}, "ffn_norm"},
    {"qwen3", {"attention + dense_ffn"}, "ffn_norm"},
    {"smollm3", {"attention + dense_ffn"}, "ffn_norm"},  // NoPE is inside attention
    // gemma3.cpp: attn_post_norm on the attention output, ffn_post_norm on
    // the feed-forward's, each before its residual add
    {"gemma3", {"attention, post-normed + dense_ffn, post-normed"}, "ffn_norm"},
    // lfm2.cpp: shortconv_block on the layers with no key heads
    {"lfm2",
     {"short_conv + dense_ffn", "attention + dense_ffn", "short_conv + dense_ffn", "short_conv + dense_ffn"},
     "ffn_norm"},
    // qwen35.cpp: the feed-forward's norm is the tensor the converter calls
    // post_attention_norm
    {"qwen35",
     {"gated_deltanet + dense_ffn", "attention + dense_ffn", "gated_deltanet + dense_ffn",
      "gated_deltanet + dense_ffn"},
     "post_attention_norm"},
    {"qwen35moe",
     {"gated_deltanet + experts", "attention + experts", "gated_deltanet + experts", "gated_deltanet + experts"},
     "post_attention_norm"},
    {"qwen3moe", {"attention + experts"}, "ffn_norm"},
    {"olmoe", {"attention + experts"}, "ffn_norm"},
};

model::Config four_layers(const std::string& arch) {
  model::Config c = test_support::small_model_config(true, 2);
  c.arch = arch;
  test_support::shape_family_layers(c);
  c.n_layers = 4;
  return c;
}

}  // namespace

TEST(BlockRecipe, EveryFamilyRunsTheSublayersLlamaCppBuilds) {
  ASSERT_EQ(std::size(kExpected), model::architectures().size()) << "a family without an expected recipe";
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.arch);
    const model::Config c = four_layers(e.arch);
    const std::vector<model::BlockRecipe> recipes = model::block_recipes(c);
    ASSERT_EQ(recipes.size(), 4u);
    for (size_t l = 0; l < 4; ++l) {
      const std::string& want = e.layers.size() == 1 ? e.layers[0] : e.layers[l];
      EXPECT_EQ(model::describe(recipes[l]), want) << "layer " << l;
      EXPECT_STREQ(recipes[l].mixer().norm, "attn_norm") << "layer " << l;
      EXPECT_STREQ(recipes[l].feed_forward().norm, e.ffn_norm) << "layer " << l;
    }
  }
}
