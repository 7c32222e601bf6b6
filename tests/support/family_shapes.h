#pragma once
// What a small test model of each architecture row needs so that its own
// parts run: a layer of each kind, Gated DeltaNet sizes a test can afford,
// and recurrent decays that stay decays after a random fill.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/config.h"
#include "model/params.h"

namespace ggtrain::test_support {

// Every architecture row's name: the values of a test run once per family.
inline std::vector<std::string> architecture_names() {
  std::vector<std::string> names;
  for (const model::Architecture& row : model::architectures()) names.push_back(row.name);
  return names;
}

// smollm3: one unrotated layer among rotated ones (the fourth); lfm2,
// qwen35: layer 1 attends, the others (0, and 2 when there are 3) are the
// family's recurrent mixer; qwen35: 2 key heads and 4 value heads of 8, a
// 3-tap convolution, RoPE on half of each head; qwen3moe, qwen35moe, olmoe:
// 4 experts, 2 per token (qwen35moe: a shared expert of its own width);
// olmoe: as many key as query heads, an untied head.
inline void shape_family_layers(model::Config& c) {
  const model::Architecture& row = c.architecture();
  if (row.no_rope_layer_step) c.n_layers = row.no_rope_layer_step;
  if (row.has_recurrent_layers()) {
    if (c.n_layers < 2) c.n_layers = 2;
    c.attention_layers = "1";
  }
  if (row.recurrent_mixer == model::Mixer::kGatedDeltaNet) {
    c.ssm_state_size = 8;
    c.ssm_group_count = 2;
    c.ssm_time_step_rank = 4;
    c.ssm_conv_kernel = 3;
    c.rope_dim = c.d_head() / 2;
  }
  if (row.has_experts()) {  // 4 experts, 2 a token (qwen3moe: of their own width)
    c.n_experts = 4;
    c.n_experts_used = 2;
    if (row.expert_width_key) c.d_ff_expert = c.d_ff / 2 + 2;
    if (row.shared_expert) c.d_ff_shared = c.d_ff / 2 - 2;
  }
  if (row.qk_norm_whole) {  // OLMoE's norms span d_model; its head is untied
    c.n_kv_heads = c.n_heads;
    c.head_dim = 0;
    c.tied = false;
  }
}

// A Gated DeltaNet's ssm_a is -exp(A_log) < 0: a random fill around 1 would
// grow the state exponentially. Each becomes -(0.5 + |value|).
template <typename T>
void keep_decays(const model::ParamLayout& layout, T* params) {
  for (const auto& t : layout.tensors())
    if (t.name.ends_with(".ssm_a"))
      for (int64_t i = 0; i < t.size; ++i) params[t.offset + i] = -(T(0.5) + std::fabs(params[t.offset + i]));
}

}  // namespace ggtrain::test_support
