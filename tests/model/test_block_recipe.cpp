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
#include "model/transformer.h"
#include "support/family_shapes.h"
#include "support/random_model.h"
#include "util/error.h"

using namespace ggtrain;

namespace {

struct Expected {
  const char* arch;
  const char* layers;  // describe_layers()
  const char* ffn_norm;  // the feed-forward half's input norm
};

// Layers 0, 2, 3 of lfm2 and the Qwen3.5 families are recurrent
// (attention_layers "1", as a GGUF's per-layer kinds would mark them);
// gemma3's layers 0 and 2 are local (a window of 8, every second layer
// global, as llama.cpp's set_swa_pattern(2)).
const Expected kExpected[] = {
    {"llama", "0-3: attention + dense_ffn\n", "ffn_norm"},
    {"qwen2", "0-3: attention + dense_ffn\n", "ffn_norm"},
    {"qwen3", "0-3: attention + dense_ffn\n", "ffn_norm"},
    // smollm3.cpp: no RoPE where (il + 1) % 4 == 0
    {"smollm3", "0-2: attention + dense_ffn\n3: attention (no RoPE) + dense_ffn\n", "ffn_norm"},
    // gemma3.cpp: attn_post_norm on the attention output, ffn_post_norm on
    // the feed-forward's, each before its residual add
    {"gemma3",
     "0, 2: attention (sliding window 8), post-normed + dense_ffn, post-normed\n"
     "1, 3: attention, post-normed + dense_ffn, post-normed\n",
     "ffn_norm"},
    // lfm2.cpp: shortconv_block on the layers with no key heads
    {"lfm2", "0, 2-3: short_conv + dense_ffn\n1: attention + dense_ffn\n", "ffn_norm"},
    // qwen35.cpp: the feed-forward's norm is the tensor the converter calls
    // post_attention_norm
    {"qwen35", "0, 2-3: gated_deltanet + dense_ffn\n1: attention + dense_ffn\n", "post_attention_norm"},
    {"qwen35moe", "0, 2-3: gated_deltanet + experts\n1: attention + experts\n", "post_attention_norm"},
    {"qwen3moe", "0-3: attention + experts\n", "ffn_norm"},
    {"olmoe", "0-3: attention + experts\n", "ffn_norm"},
};

model::Config four_layers(const std::string& arch) {
  model::Config c = test_support::small_model_config(true, 2);
  c.arch = arch;
  test_support::shape_family_layers(c);
  c.n_layers = 4;
  if (arch == "gemma3") c.sliding_window = 8, c.swa_pattern = 2;
  return c;
}

}  // namespace

TEST(BlockRecipe, EveryFamilyRunsTheSublayersLlamaCppBuilds) {
  ASSERT_EQ(std::size(kExpected), model::architectures().size()) << "a family without an expected recipe";
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.arch);
    const model::Config c = four_layers(e.arch);
    EXPECT_EQ(model::describe_layers(c), e.layers);
    for (int64_t l = 0; l < 4; ++l) {
      EXPECT_STREQ(model::block_recipe(c, l).mixer().norm, "attn_norm") << "layer " << l;
      EXPECT_STREQ(model::block_recipe(c, l).feed_forward().norm, e.ffn_norm) << "layer " << l;
    }
  }
}

// A window past the context is refused where every layer attends, allowed
// where some layers are recurrent, with what the attention layers then do.
TEST(BlockRecipe, AWindowPastTheContextNeedsARecurrentMixer) {
  for (const Expected& e : kExpected) {
    model::Config c = four_layers(e.arch);
    c.ctx = 24;
    const std::string a = e.arch;
    const bool recurrent = a == "lfm2" || a == "qwen35" || a == "qwen35moe";
    EXPECT_EQ(c.has_recurrent_layers(), recurrent) << a;
    EXPECT_EQ(model::window_past_context(c, 24), "") << a;
    if (recurrent) EXPECT_NO_THROW(model::Transformer<float>(c, 1, 40)) << a;
    else EXPECT_THROW(model::Transformer<float>(c, 1, 40), Error) << a;
  }
  model::Config q = four_layers("qwen35");
  q.ctx = 24;
  EXPECT_EQ(model::window_past_context(q, 40),
            "the gated_deltanet layers (0, 2-3) carry their state without positions, but the attention layers (1) "
            "attend over all 40 tokens, at rotary positions up to 39, past the model's context of 24");
  model::Config l = four_layers("lfm2");
  l.ctx = 24;
  l.attention_layers = "0,3";
  EXPECT_EQ(model::window_past_context(l, 25),
            "the short_conv layers (1-2) carry their state without positions, but the attention layers (0, 3) attend "
            "over all 25 tokens, at rotary positions up to 24, past the model's context of 24");
}
