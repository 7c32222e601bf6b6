#include "model/architecture.h"

namespace ggtrain::model {

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> rows = {
      // name, RoPE pairs, qk_norm, qkv_bias, head size key, feed-forward, post_norms, embedding_scale,
      // swa pattern, no-RoPE step
      {"llama", RopeLayout::kAdjacentPairs, false, false, false, FfnActivation::kSilu, false, false, 0, 0,
       "Llama 1-3.x, SmolLM, SmolLM2, TinyLlama, Mistral 7B"},
      {"qwen2", RopeLayout::kHalves, false, true, false, FfnActivation::kSilu, false, false, 0, 0, "Qwen2, Qwen2.5"},
      {"qwen3", RopeLayout::kHalves, true, false, true, FfnActivation::kSilu, false, false, 0, 0, "Qwen3 (dense)"},
      {"gemma3", RopeLayout::kHalves, true, false, true, FfnActivation::kGeluTanh, true, true, 6, 0, "Gemma 3 (text)"},
      // llama with every fourth layer unrotated; the converter writes it as
      // llama (adjacent pairs, no key for the step).
      {"smollm3", RopeLayout::kAdjacentPairs, false, false, false, FfnActivation::kSilu, false, false, 0, 4, "SmolLM3"},
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
