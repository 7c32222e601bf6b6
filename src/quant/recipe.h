#pragma once
// llama.cpp's file types ("q4_k_m", ...) and the per-tensor type choice its
// llama_model_quantize makes (with or without an importance matrix):
// a default type, output (or tied token_embd) raised to Q6_K, some attn_v
// and ffn_down layers raised in the _M/_S mixes, and a 32-block fallback
// when a row length is not a multiple of 256.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/types.h"

namespace ggtrain::quant {

// Values are llama_ftype's (general.file_type).
enum class FileType : uint32_t {
  F32 = 0,  // llama.cpp's ALL_F32
  F16 = 1,  // MOSTLY_F16
  BF16 = 32,  // MOSTLY_BF16
  Q4_0 = 2,
  Q8_0 = 7,
  Q5_0 = 8,
  Q5_1 = 9,
  Q4_K_S = 14,
  Q4_K_M = 15,
  Q5_K_S = 16,
  Q5_K_M = 17,
  Q6_K = 18,
};

std::optional<FileType> quantized_file_type(std::string_view name);  // "q4_k_m", case-insensitive; not "f16"
// The file type whose weights are all `t` (F32, F16 or BF16), as llama_model_quantize writes it.
std::optional<FileType> float_file_type(gguf::TensorType t);
std::string_view file_type_name(FileType t);  // "q4_k_m"
std::string quantized_file_type_names();  // "q4_0, q5_0, ..." for messages

// llama.cpp's order of tensors in a quantized file (its loader's map):
// tensors outside blk.N first, then by layer number; by name within each.
bool llama_cpp_tensor_before(const std::string& a, const std::string& b);

struct TensorShape {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the row length
};

class TypeRecipe {
 public:
  // `tensors`: every tensor of the model, `n_layers` its block count,
  // `n_experts` its experts per layer (0: dense); has_imatrix: quantized
  // against an importance matrix (llama.cpp then raises Q4_0's and Q5_0's
  // first eighth of ffn_down layers to Q4_1 and Q5_1).
  TypeRecipe(FileType ft, const std::vector<TensorShape>& tensors, int n_layers, int n_experts = 0,
             bool has_imatrix = false);
  // The type of the next tensor, called in llama_cpp_tensor_before order
  // (attn_v and ffn_down choices depend on how many came before); `current`
  // is kept for tensors llama.cpp does not quantize (norms, 1-D).
  gguf::TensorType next(const TensorShape& t, gguf::TensorType current);
  // Of the tensors next() quantized so far: how many, and how many took a
  // fallback type because their rows did not fit the chosen type's blocks
  // (llama-quantize reports the same count).
  int quantized() const { return quantized_; }
  int fallbacks() const { return fallbacks_; }

 private:
  FileType ft_;
  gguf::TensorType default_;
  bool tied_embeddings_ = true, has_imatrix_ = false;
  int n_layers_ = 0, n_experts_ = 0, n_attn_v_ = 0, i_attn_v_ = 0, i_ffn_down_ = 0;
  int quantized_ = 0, fallbacks_ = 0;
  gguf::TensorType mix_choice(const TensorShape& t);
};

}  // namespace ggtrain::quant
