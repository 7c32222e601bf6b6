#include "model/architecture.h"

namespace ggtrain::model {

namespace {

constexpr Architecture kQwen3{
    .name = "qwen3", .rope = RopeLayout::kHalves, .qk_norm = true, .writes_head_size = true, .doc = "Qwen3 (dense)"};

// Gated DeltaNet layers with gated attention (qwen3's head norms, NeoX pairs
// on the first rope.dimension_count dimensions) every
// full_attention_interval-th layer
constexpr Architecture kQwen35{.name = "qwen35",
                               .rope = RopeLayout::kHalves,
                               .qk_norm = true,
                               .writes_head_size = true,
                               .recurrent_mixer = Mixer::kGatedDeltaNet,
                               .ffn_norm = "post_attention_norm",
                               .attn_output_gate = true,
                               .partial_rope = true,
                               .doc = "Qwen3.5 (dense)"};

// A dense family's layers with Qwen's experts as their feed-forward: the
// chosen weights renormalised, the experts' width a key of its own,
// Qwen's load-balancing weight; `shared`: a shared expert beside them.
constexpr Architecture with_qwen_experts(Architecture dense, const char* name, bool shared, const char* doc) {
  dense.name = name;
  dense.feed_forward = FeedForward::kExperts;
  dense.renormalize_expert_weights = true;
  dense.expert_width_key = true;
  dense.router_aux_loss_coef = 0.001;
  dense.shared_expert = shared;
  dense.doc = doc;
  return dense;
}

}  // namespace

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> rows = {
      {.name = "llama", .doc = "Llama 1-3.x, SmolLM, SmolLM2, TinyLlama, Mistral 7B"},
      {.name = "qwen2", .rope = RopeLayout::kHalves, .qkv_bias = true, .doc = "Qwen2, Qwen2.5"},
      kQwen3,
      {.name = "gemma3",
       .rope = RopeLayout::kHalves,
       .qk_norm = true,
       .writes_head_size = true,
       .ffn_activation = FfnActivation::kGeluTanh,
       .post_norms = true,
       .embedding_scale = true,
       .default_swa_pattern = 6,
       .doc = "Gemma 3 (text)"},
      // llama with every fourth layer unrotated; the converter writes it as
      // llama (adjacent pairs, no key for the step).
      {.name = "smollm3", .no_rope_layer_step = 4, .doc = "SmolLM3"},
      // attention (qwen3's head norms, NeoX pairs) on the layers
      // head_count_kv marks, double-gated short convolutions on the others
      {.name = "lfm2",
       .rope = RopeLayout::kHalves,
       .qk_norm = true,
       .recurrent_mixer = Mixer::kShortConv,
       .output_norm = "token_embd_norm.weight",
       .doc = "LFM2, LFM2.5 (dense)"},
      kQwen35,
      with_qwen_experts(kQwen35, "qwen35moe", true, "Qwen3.5-MoE (Qwen3.5-35B-A3B)"),
      with_qwen_experts(kQwen3, "qwen3moe", false, "Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B)"),
      // llama's attention with NeoX pairs and norms over the whole query
      // and key rows, experts in every layer, their weights as the router
      // gives them
      {.name = "olmoe",
       .rope = RopeLayout::kHalves,
       .qk_norm = true,
       .qk_norm_whole = true,
       .feed_forward = FeedForward::kExperts,
       .router_aux_loss_coef = 0.01,
       .doc = "OLMoE (OLMoE-1B-7B)"},
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
