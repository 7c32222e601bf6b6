#include "model/architecture.h"

namespace ggtrain::model {

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> rows = {
      // name    RoPE pairs                 qk_norm qkv_bias head size key
      {"llama", RopeLayout::kAdjacentPairs, false, false, false, "Llama 1-3.x, SmolLM, TinyLlama, Mistral 7B"},
      {"qwen2", RopeLayout::kHalves, false, true, false, "Qwen2, Qwen2.5"},
      {"qwen3", RopeLayout::kHalves, true, false, true, "Qwen3 (dense)"},
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
