#include "model/architecture.h"

namespace ggtrain::model {

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> rows = {
      // name, RoPE pairs, qk_norm, qkv_bias, head size key, feed-forward, post_norms, embedding_scale,
      // swa pattern, no-RoPE step, the mixer of the layers that do not attend, final norm, feed-forward norm,
      // gated attention, partial RoPE
      {"llama", RopeLayout::kAdjacentPairs, false, false, false, FfnActivation::kSilu, false, false, 0, 0,
       Mixer::kAttention, "output_norm.weight", "ffn_norm", false, false,
       "Llama 1-3.x, SmolLM, SmolLM2, TinyLlama, Mistral 7B"},
      {"qwen2", RopeLayout::kHalves, false, true, false, FfnActivation::kSilu, false, false, 0, 0, Mixer::kAttention,
       "output_norm.weight", "ffn_norm", false, false, "Qwen2, Qwen2.5"},
      {"qwen3", RopeLayout::kHalves, true, false, true, FfnActivation::kSilu, false, false, 0, 0, Mixer::kAttention,
       "output_norm.weight", "ffn_norm", false, false, "Qwen3 (dense)"},
      {"gemma3", RopeLayout::kHalves, true, false, true, FfnActivation::kGeluTanh, true, true, 6, 0, Mixer::kAttention,
       "output_norm.weight", "ffn_norm", false, false, "Gemma 3 (text)"},
      // llama with every fourth layer unrotated; the converter writes it as
      // llama (adjacent pairs, no key for the step).
      {"smollm3", RopeLayout::kAdjacentPairs, false, false, false, FfnActivation::kSilu, false, false, 0, 4,
       Mixer::kAttention, "output_norm.weight", "ffn_norm", false, false, "SmolLM3"},
      // attention (qwen3's head norms, NeoX pairs) on the layers
      // head_count_kv marks, double-gated short convolutions on the others
      {"lfm2", RopeLayout::kHalves, true, false, false, FfnActivation::kSilu, false, false, 0, 0, Mixer::kShortConv,
       "token_embd_norm.weight", "ffn_norm", false, false, "LFM2, LFM2.5 (dense)"},
      // Gated DeltaNet layers with gated attention (qwen3's head norms, NeoX
      // pairs on the first rope.dimension_count dimensions) every
      // full_attention_interval-th layer
      {"qwen35", RopeLayout::kHalves, true, false, true, FfnActivation::kSilu, false, false, 0, 0,
       Mixer::kGatedDeltaNet, "output_norm.weight", "post_attention_norm", true, true, "Qwen3.5 (dense)"},
  };
  return rows;
}

const Architecture* find_architecture(std::string_view name) {
  for (const auto& a : architectures())
    if (name == a.name) return &a;
  return nullptr;
}

std::string architecture_names() {
  std::string out;
  for (const auto& a : architectures()) out += std::string(out.empty() ? "" : ", ") + a.name;
  return out;
}

}  // namespace ggtrain::model
