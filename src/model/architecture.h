#pragma once
// What tells one decoder family from another, as llama.cpp reads and runs
// it: one row per architecture (general.architecture), read by the config,
// the GGUF reader and writer, the training passes and the decoder. A new
// family that differs only in these traits is one row.
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::model {

// How RoPE pairs a head's dimensions (ggml's rope modes).
enum class RopeLayout {
  kAdjacentPairs,  // (x[2i], x[2i+1]): mode 0, LLM_ARCH_LLAMA
  kHalves,         // (x[i], x[i + d/2]): NeoX, mode 2 (qwen2, qwen3, gemma3)
};

struct Architecture {
  const char* name;  // general.architecture, and the prefix of its keys ("qwen3.block_count")
  RopeLayout rope;
  // An RMS norm over each query and each key head, after the projection and
  // before RoPE, with weights blk.N.attn_q_norm / attn_k_norm [head size].
  bool qk_norm;
  // Biases on the query, key and value projections (blk.N.attn_q.bias, ...).
  bool qkv_bias;
  // The converter writes <arch>.attention.key_length / value_length.
  bool writes_head_size;
  const char* doc;  // what a user knows it as
};

const std::vector<Architecture>& architectures();
// The row called `name`, or null.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen3", for messages.
std::string architecture_names();

}  // namespace ggtrain::model
