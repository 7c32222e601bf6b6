#include "model/block_recipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "model/config.h"

namespace ggtrain::model {

const char* sublayer_name(Sublayer s) {
  switch (s) {
    case Sublayer::kAttention: return "attention";
    case Sublayer::kShortConv: return "short_conv";
    case Sublayer::kGatedDeltaNet: return "gated_deltanet";
    case Sublayer::kDenseFfn: return "dense_ffn";
    case Sublayer::kExperts: return "experts";
  }
  return "?";
}

namespace {
Sublayer mixer_sublayer(Mixer m) {
  switch (m) {
    case Mixer::kAttention: return Sublayer::kAttention;
    case Mixer::kShortConv: return Sublayer::kShortConv;
    case Mixer::kGatedDeltaNet: return Sublayer::kGatedDeltaNet;
  }
  return Sublayer::kAttention;
}
}  // namespace

BlockRecipe block_recipe(const Config& c, int64_t l) {
  const Architecture& a = c.architecture();
  const Sublayer mixer = mixer_sublayer(c.mixer(l));
  // the families with post norms have no recurrent layers (gemma3); a
  // recurrent layer of a family that had both would not carry them
  const bool post = a.post_norms && mixer == Sublayer::kAttention;
  return {{HalfBlock{mixer, "attn_norm", post ? "post_attention_norm" : nullptr},
           HalfBlock{a.has_experts() ? Sublayer::kExperts : Sublayer::kDenseFfn, a.ffn_norm,
                     post ? "post_ffw_norm" : nullptr}}};
}

std::vector<BlockRecipe> block_recipes(const Config& c) {
  std::vector<BlockRecipe> out;
  out.reserve(size_t(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) out.push_back(block_recipe(c, l));
  return out;
}

namespace {
std::string describe_layer(const Config& c, int64_t l) {
  const BlockRecipe r = block_recipe(c, l);
  std::string out = sublayer_name(r.mixer().sublayer);
  if (r.mixer().sublayer == Sublayer::kAttention) {
    if (!c.uses_rope(l)) out += " (no RoPE)";
    if (c.is_local_layer(l)) out += fmt::format(" (sliding window {})", c.sliding_window);
  }
  if (r.mixer().post_norm) out += ", post-normed";
  out += std::string(" + ") + sublayer_name(r.feed_forward().sublayer);
  if (r.feed_forward().post_norm) out += ", post-normed";
  return out;
}

// "0, 2-3" of ascending layer indices
std::string layer_ranges(const std::vector<int64_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", layers[i]) : fmt::format("{}-{}", layers[i], layers[j]);
    i = j + 1;
  }
  return out;
}
}  // namespace

std::string describe_layers(const Config& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> kinds;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string what = describe_layer(c, l);
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == what; });
    if (it == kinds.end()) kinds.push_back({what, {l}});
    else it->second.push_back(l);
  }
  std::string out;
  for (const auto& [what, layers] : kinds) out += layer_ranges(layers) + ": " + what + "\n";
  return out;
}

std::string window_past_context(const Config& c, int64_t window) {
  if (window <= c.ctx) return "";
  std::vector<int64_t> attention, recurrent;
  bool rotary = false;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (c.is_recurrent_layer(l)) {
      recurrent.push_back(l);
      continue;
    }
    attention.push_back(l);
    rotary = rotary || c.uses_rope(l);
  }
  std::string out = fmt::format(
      "the {} layers ({}) carry their state without positions, but the attention layers ({}) attend over all {} "
      "tokens",
      sublayer_name(mixer_sublayer(c.architecture().recurrent_mixer)), layer_ranges(recurrent), layer_ranges(attention),
      window);
  if (rotary) out += fmt::format(", at rotary positions up to {}, past the model's context of {}", window - 1, c.ctx);
  return out;
}

}  // namespace ggtrain::model
