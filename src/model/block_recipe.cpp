#include "model/block_recipe.h"

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

std::string describe(const BlockRecipe& r) {
  std::string out;
  for (const HalfBlock& h : r.halves) {
    if (!out.empty()) out += " + ";
    out += sublayer_name(h.sublayer);
    if (h.post_norm) out += ", post-normed";
  }
  return out;
}

}  // namespace ggtrain::model
