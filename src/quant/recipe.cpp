#include "quant/recipe.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "quant/type_traits.h"
#include "util/error.h"

namespace ggtrain::quant {

using gguf::TensorType;

namespace {

struct FileTypeRow {
  FileType ft;
  std::string_view name;
  TensorType default_type;
};
// The float ones first: llama.cpp converts every tensor it would quantize to
// their type, with no mix and no fallback.
constexpr std::array<FileTypeRow, 12> kFileTypes{{
    {FileType::F32, "f32", TensorType::F32},
    {FileType::F16, "f16", TensorType::F16},
    {FileType::BF16, "bf16", TensorType::BF16},
    {FileType::Q4_0, "q4_0", TensorType::Q4_0},
    {FileType::Q5_0, "q5_0", TensorType::Q5_0},
    {FileType::Q5_1, "q5_1", TensorType::Q5_1},
    {FileType::Q8_0, "q8_0", TensorType::Q8_0},
    {FileType::Q4_K_S, "q4_k_s", TensorType::Q4_K},
    {FileType::Q4_K_M, "q4_k_m", TensorType::Q4_K},
    {FileType::Q5_K_S, "q5_k_s", TensorType::Q5_K},
    {FileType::Q5_K_M, "q5_k_m", TensorType::Q5_K},
    {FileType::Q6_K, "q6_k", TensorType::Q6_K},
}};

const FileTypeRow& row(FileType ft) {
  for (const auto& r : kFileTypes)
    if (r.ft == ft) return r;
  fail("unknown file type {}", uint32_t(ft));
}

int layer_of(const std::string& name) {
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  return layer;
}

int n_dims(const std::vector<uint64_t>& ne) {
  int n = 1;
  for (size_t i = 0; i < ne.size(); ++i)
    if (ne[i] > 1) n = int(i) + 1;
  return n;
}

// F32, F16, BF16: one element a block.
bool is_float_type(TensorType t) { return gguf::traits(t).block_size == 1; }

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// llama.cpp quantizes 2-D (and 3-D) tensors whose name ends in "weight",
// except norms, routers and LFM2's and Qwen3.5's small convolution kernels
// (and tensors other architectures have).
bool quantizable(const TensorShape& t) {
  return n_dims(t.ne) >= 2 && t.name.size() >= 6 && t.name.compare(t.name.size() - 6, 6, "weight") == 0 &&
         !contains(t.name, "_norm.weight") && !contains(t.name, "ffn_gate_inp.weight") &&
         !contains(t.name, "shortconv.conv.weight") && !contains(t.name, "ssm_conv1d");
}

// The layers that get more bits in the _M mixes: the first and last eighth
// and every third layer between.
// llama.cpp's "attention-v-like" tensors, which the mixes give more bits:
// attn_v, and the fused attn_qkv (Qwen3.5's Gated DeltaNet input).
bool is_attn_v_like(const std::string& name) {
  return contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight");
}

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// A 256-block type on rows that are not a multiple of 256 falls back to a
// 32-block one; a row that is not even a multiple of 32 is stored F16.
TensorType fallback(TensorType t, uint64_t row_length) {
  if (row_length % gguf::traits(t).block_size == 0) return t;
  t = codec(t, "quantize to").small_row_fallback;
  return row_length % gguf::traits(t).block_size == 0 ? t : TensorType::F16;
}

}  // namespace

std::optional<FileType> quantized_file_type(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const auto& r : kFileTypes)
    if (r.name == lower && !is_float_type(r.default_type)) return r.ft;
  return std::nullopt;
}

std::optional<FileType> float_file_type(TensorType t) {
  for (const auto& r : kFileTypes)
    if (r.default_type == t && is_float_type(t)) return r.ft;
  return std::nullopt;
}

std::string_view file_type_name(FileType t) { return row(t).name; }

std::string quantized_file_type_names() {
  std::string out;
  for (const auto& r : kFileTypes)
    if (!is_float_type(r.default_type)) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

bool llama_cpp_tensor_before(const std::string& a, const std::string& b) {
  const int la = layer_of(a), lb = layer_of(b);
  return la != lb ? la < lb : a < b;
}

TypeRecipe::TypeRecipe(FileType ft, const std::vector<TensorShape>& tensors, int n_layers, int n_experts,
                       bool has_imatrix)
    : ft_(ft), default_(row(ft).default_type), has_imatrix_(has_imatrix), n_layers_(n_layers), n_experts_(n_experts) {
  for (const auto& t : tensors) {
    if (is_attn_v_like(t.name)) ++n_attn_v_;
    if (t.name == "output.weight") tied_embeddings_ = false;
  }
}

TensorType TypeRecipe::next(const TensorShape& t, TensorType current) {
  if (!quantizable(t)) return current;
  if (is_float_type(default_)) return default_;  // llama.cpp's mixes and fallbacks are for quantized types
  const TensorType chosen = mix_choice(t), stored = fallback(chosen, t.ne[0]);
  ++quantized_;
  if (stored != chosen) ++fallbacks_;
  return stored;
}

// llama_tensor_get_type_impl's branches that apply to these file types.
TensorType TypeRecipe::mix_choice(const TensorShape& t) {
  const bool mix_m = ft_ == FileType::Q4_K_M || ft_ == FileType::Q5_K_M;
  if (t.name == "output.weight" || (tied_embeddings_ && t.name == "token_embd.weight")) {
    if (t.ne[0] % gguf::traits(default_).block_size != 0) return TensorType::Q8_0;
    return default_ == TensorType::Q8_0 ? TensorType::Q8_0 : TensorType::Q6_K;
  }
  // llama.cpp gives a model of exactly 8 experts (Mixtral's count) more bits
  // in its attention: K and V (or fused QKV) as Q8_0, the output as Q5_K in
  // the Q4_K mixes.
  const bool eight_experts = n_experts_ == 8;
  if (is_attn_v_like(t.name)) {
    const int i = i_attn_v_++;
    if (eight_experts) return TensorType::Q8_0;
    if (mix_m && use_more_bits(i, n_attn_v_)) return TensorType::Q6_K;
    if (ft_ == FileType::Q4_K_S && i < 4) return TensorType::Q5_K;
    return default_;
  }
  if (eight_experts && contains(t.name, "attn_k.weight")) return TensorType::Q8_0;
  if (eight_experts && contains(t.name, "attn_output.weight") && (ft_ == FileType::Q4_K_S || ft_ == FileType::Q4_K_M))
    return TensorType::Q5_K;
  if (contains(t.name, "ffn_down")) {
    // llama.cpp counts ffn_down tensors, but with experts (a layer may have
    // ffn_down_exps and ffn_down_shexp) it reads the layer from the name
    const int counted = i_ffn_down_++;
    const int i = n_experts_ > 1 ? layer_of(t.name) : counted;
    if (mix_m && use_more_bits(i, n_layers_)) return TensorType::Q6_K;
    if (ft_ == FileType::Q4_K_S && i < n_layers_ / 8) return TensorType::Q5_K;
    // llama.cpp's guard against Q4_0/Q5_0 going wrong on the first ffn_down
    // layers, taken only with an importance matrix
    if ((ft_ == FileType::Q4_0 || ft_ == FileType::Q5_0) && has_imatrix_ && i < n_layers_ / 8)
      return ft_ == FileType::Q4_0 ? TensorType::Q4_1 : TensorType::Q5_1;
    return default_;
  }
  return default_;
}

}  // namespace ggtrain::quant
