#pragma once
// LoRA adapters in llama.cpp's GGUF format (what its convert_lora_to_gguf.py
// writes and llama_adapter_lora_init reads): general.type = "adapter",
// adapter.type = "lora", adapter.lora.alpha, and per target matrix W the
// tensors "<W>.lora_a" (ggml ne [in, rank]) and "<W>.lora_b" (ne [rank, out]);
// llama.cpp computes W x + (alpha / rank) * scale * B (A x).
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/params.h"

namespace ggtrain::model {

// A random (PEFT's kaiming-uniform bound 1/sqrt(in)), B zero: at step 0 the
// adapted model computes exactly what the base does.
void init_lora(const ParamLayout& layout, float* params, uint64_t seed);

// Where an adapter written by ggtrain records the base model it was trained
// on (llama.cpp ignores the key): named when the adapter meets another base.
inline constexpr const char* kAdapterBaseKey = "ggtrain.lora.base_model";

// Adapter metadata and every *.lora_a / *.lora_b tensor of `layout` (F32),
// with the base model's path when given. `params` must stay valid until
// w.write().
void add_lora_adapter(gguf::GgufWriter& w, const Config& c, const ParamLayout& layout, const float* params,
                      const std::string& base_path = "");

struct LoraPair {
  std::string weight;  // base tensor name, e.g. "blk.0.attn_q.weight"
  int64_t rank = 0, in = 0, out = 0;
  // A stack of experts' matrices ("blk.0.ffn_up_exps.weight"): one pair per
  // expert, stacked as the experts are (ggml ne [in, rank, experts] and
  // [rank, out, experts]); 1 for a plain matrix.
  int64_t experts = 1;
  std::vector<float> a;  // [experts, rank, in]
  std::vector<float> b;  // [experts, out, rank]
};

struct LoraAdapter {
  double alpha = 0;
  std::vector<LoraPair> pairs;
  // (alpha / rank) * user scale, as llama.cpp applies it (alpha 0: the user scale).
  double scale_of(const LoraPair& p, double user_scale) const {
    return alpha != 0 ? user_scale * alpha / double(p.rank) : user_scale;
  }
};

// The adapter of a run in memory: every *.lora_a / *.lora_b pair of
// `layout` (c.lora's targets) copied out of `params`, alpha = c.lora.alpha.
LoraAdapter lora_adapter_of(const Config& c, const ParamLayout& layout, const float* params);

// Reads and checks an adapter against the base model's config: every pair
// complete, names of block matrices, shapes matching; errors name the file
// and the tensor.
LoraAdapter read_lora_adapter(const gguf::GgufFile& f, const Config& base);

// Row o of scale * B A for one matrix (a [rank, in], b [out, rank]), into
// delta[in], each element summed over k in order in double: what merge_lora
// adds to the row, and what QAT of a LoRA run adds before quantizing it.
void lora_row_delta(const float* a, const float* b, int64_t rank, int64_t in, int64_t o, double scale, double* delta);

// W + scale * B A (accumulated in double) for every pair, into `params` laid
// out by ParamLayout(base) (a plain model).
void merge_lora(const LoraAdapter& adapter, double user_scale, const ParamLayout& layout, float* params);

}  // namespace ggtrain::model
