#pragma once
// What one block computes, in the order llama.cpp's graphs compute it, for
// every family: two halves, each
//     x = x + post_norm(sublayer(norm(x)))
// the first with the layer's mixer (attention, short convolution or Gated
// DeltaNet, as the GGUF's per-layer kinds say), the second with its
// feed-forward (dense or experts); post_norm only in the families that have
// one. The training passes (model/transformer.cpp) with their
// recomputation, and the decoder (infer/decoder.cpp), walk this recipe; a
// new kind of sublayer is a forward, a backward and a decode step, each
// reached from one switch (its training passes in
// model/transformer_<kind>.cpp, its decode step in infer/decoder_<kind>.cpp).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ggtrain::model {

struct Config;

enum class Sublayer { kAttention, kShortConv, kGatedDeltaNet, kDenseFfn, kExperts };
const char* sublayer_name(Sublayer s);  // "attention", "short_conv", ...

// The halves' indices in BlockRecipe::halves.
enum BlockHalf { kMixerHalf = 0, kFfnHalf = 1 };

struct HalfBlock {
  Sublayer sublayer;
  const char* norm;  // its input norm in blk.N ("attn_norm"; "ffn_norm", Qwen3.5's "post_attention_norm")
  const char* post_norm;  // its output norm before the residual add ("post_ffw_norm"), or null
};

struct BlockRecipe {
  std::array<HalfBlock, 2> halves;  // [kMixerHalf], [kFfnHalf]
  const HalfBlock& mixer() const { return halves[kMixerHalf]; }
  const HalfBlock& feed_forward() const { return halves[kFfnHalf]; }
};

BlockRecipe block_recipe(const Config& c, int64_t l);
std::vector<BlockRecipe> block_recipes(const Config& c);  // one per layer
// Every layer of c grouped by what it runs, a line each in the order the
// kinds first appear: "0, 2-3: gated_deltanet + dense_ffn"; attention
// layers without RoPE or with a sliding window say so ("3: attention (no
// RoPE) + dense_ffn"). For `ggtrain inspect`.
std::string describe_layers(const Config& c);

// A window longer than c.ctx is refused for a model whose every mixer is
// attention: past ctx its positions are ones the model was not built for.
// Recurrent mixers (short_conv, gated_deltanet) have no positional limit,
// so a model with any (Config::has_recurrent_layers) is allowed the
// window; this says what its attention layers then do ("" when the
// window fits).
std::string window_past_context(const Config& c, int64_t window);

}  // namespace ggtrain::model
