#pragma once
// Where each parameter lives inside one contiguous buffer. The same layout
// serves parameters, gradients and both AdamW moments, and it is exactly the
// llama.cpp tensor set, so a checkpoint writes these ranges out unchanged.
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/config.h"

namespace ggtrain::model {

struct ParamTensor {
  std::string name;  // llama.cpp name, e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> shape;  // row-major [out, in] (ggml ne is the reverse)
  int64_t offset = 0;  // in elements from the buffer start
  // Where the parameter itself lives in the full layout's buffer: == offset,
  // except in a trainable() subset, whose offsets index the compact
  // gradient and optimizer-moment buffers.
  int64_t source_offset = 0;
  int64_t size = 0;
  bool decay = false;  // AdamW weight decay: matrices (and the experts' stacks of them) only
};

class ParamLayout {
 public:
  // `held_elsewhere`: tensors the model keeps outside the buffer (a LoRA
  // run's quantized base matrices); the others pack as if they were absent.
  explicit ParamLayout(const Config& c, const std::set<std::string>& held_elsewhere = {});
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  int64_t total() const { return total_; }
  const ParamTensor& get(const std::string& name) const;  // throws if absent
  const ParamTensor* find(const std::string& name) const;
  std::set<std::string> names() const;  // of every tensor
  // Whether the model's file holds tensor `name` outside the parameters:
  // a multi-token-prediction block's (Config::nextn_tensors).
  bool carries(const std::string& name) const { return carried_.count(name) > 0; }
  // The tensors not in `frozen`, packed anew (source_offset kept): the layout
  // of gradients and AdamW moments when part of the model is frozen.
  ParamLayout trainable(const std::set<std::string>& frozen) const;

 private:
  ParamLayout() = default;
  void add(const std::string& name, std::vector<int64_t> shape);
  std::vector<ParamTensor> tensors_;
  std::set<std::string> carried_;
  int64_t total_ = 0;
};

// Typed pointers into a buffer laid out by ParamLayout (parameters or grads).
// The weight matrices of a block (blk.N.<name>.weight in llama.cpp's
// names); each can be a LoRA target. This is the one list of them. An
// attention layer has the four attn_ ones, a short-convolution layer the two
// shortconv ones, a Gated DeltaNet layer the five after them
// (Config::mixer); every layer of a dense family the three ffn_ ones, every
// layer of a mixture-of-experts family the router ffn_gate_inp (its experts
// are ExpertMatrix).
enum BlockMatrix {
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOutput,
  kFfnGate,
  kFfnUp,
  kFfnDown,
  kConvInProj,  // [3C, C]: the gates b, c and the input x of a short convolution
  kConvOutProj,  // [C, C]
  kGdnQkv,  // "attn_qkv" [conv_dim, C]: the convolution's input (q | k | v) of a Gated DeltaNet layer
  kGdnGate,  // "attn_gate" [value_dim, C]: z, the output norm's gate
  kSsmBeta,  // [value heads, C]: beta before its sigmoid
  kSsmAlpha,  // [value heads, C]: the decay's input
  kSsmOut,  // [C, value_dim]
  kFfnGateInp,  // [experts, C]: the router's logits
  kFfnGateShexp,  // [shared_ff, C]: the shared expert's gate (Architecture::shared_expert)
  kFfnUpShexp,  // [shared_ff, C]
  kFfnDownShexp,  // [C, shared_ff]
  kNumBlockMatrices
};
const char* block_matrix_name(BlockMatrix m);  // "attn_q", ...
// A mixture-of-experts layer's experts: one 3-D tensor
// blk.N.ffn_<gate|up|down>_exps.weight per kind, [experts, out, in] (ggml ne
// [in, out, experts]); expert e's matrix is its e-th [out, in] slice.
enum ExpertMatrix { kExpGate, kExpUp, kExpDown, kNumExpertMatrices };
const char* expert_matrix_name(ExpertMatrix m);  // "ffn_gate_exps", ...
// The matrix called `name` ("ffn_up_exps"), or kNumExpertMatrices when none is.
ExpertMatrix expert_matrix_from_name(std::string_view name);
// What train.lora.targets may name: a block matrix, or an expert stack
// (each expert then gets its own A and B: lora_a [experts, rank, in],
// lora_b [experts, out, rank], as llama.cpp's build_lora_mm_id reads them).
bool is_lora_target(std::string_view name);
std::string lora_target_names_text();  // "attn_q, ..., ffn_down_exps", for messages
// [out, in] of each expert's matrix m.
std::pair<int64_t, int64_t> expert_matrix_shape(const Config& c, ExpertMatrix m);
// The matrix called `name` ("attn_q"), or kNumBlockMatrices when none is.
BlockMatrix block_matrix_from_name(std::string_view name);
// "attn_q, attn_k, ..., ffn_down", for messages.
std::string block_matrix_names_text();
// llama.cpp's name for tensor `what` of block l: "blk.L.WHAT.weight" (kind
// "bias": "blk.L.WHAT.bias").
std::string block_tensor_name(int64_t l, std::string_view what, std::string_view kind = "weight");
// The block a tensor name belongs to ("blk.3.attn_q.weight" -> 3), else -1
// (also for an index of more than nine digits, which no file can mean).
int64_t block_of(std::string_view tensor_name);
// [out, in] of matrix m.
std::pair<int64_t, int64_t> block_matrix_shape(const Config& c, BlockMatrix m);
// Whether block l has matrix m (its mixer's kind decides).
bool layer_has_matrix(const Config& c, int64_t l, BlockMatrix m);
// The block matrices some layer of the model has, in BlockMatrix order.
std::vector<BlockMatrix> model_block_matrices(const Config& c);
// The short convolution's kernel: blk.N.shortconv.conv.weight [C, taps].
inline constexpr const char* kShortConvKernel = "shortconv.conv";
// A Gated DeltaNet layer's vectors and its convolution kernel, by llama.cpp's
// names: ssm_conv1d.weight [conv_dim, taps], ssm_dt.bias [value heads],
// ssm_a [value heads] (no suffix: -exp(A_log), as the converter writes it),
// ssm_norm.weight [head size].
std::string ssm_a_name(int64_t l);
// The shared expert's gate: blk.N.ffn_gate_inp_shexp.weight [C], one logit a token.
inline constexpr const char* kSharedExpertGate = "ffn_gate_inp_shexp";

// A block's vectors and small tensors by role. Its matrices (BlockMatrix)
// are bound by name where they are used (Transformer::bind_layers), as they
// may be held quantized.
template <typename T>
struct LayerWeights {
  // Per half of the block (BlockRecipe, by BlockHalf): the [C] input norm,
  // and the [C] output norm before the residual add where the recipe has one
  // (else null).
  std::array<T*, 2> norm{}, post_norm{};
  // Architecture::qk_norm: [d_head] weights of the query and key head norms; else null.
  T *attn_q_norm = nullptr, *attn_k_norm = nullptr;
  // Architecture::qkv_bias: [q_dim], [kv_dim], [kv_dim]; else null.
  T *bq = nullptr, *bk = nullptr, *bv = nullptr;
  // Short-convolution layers: the kernel [C, taps].
  T* conv_kernel = nullptr;
  // Gated DeltaNet layers: the convolution kernel [conv_dim, taps], dt_bias,
  // a [value heads], the output norm [head size].
  T *ssm_conv = nullptr, *ssm_dt = nullptr, *ssm_a = nullptr, *ssm_norm = nullptr;
  // Mixture-of-experts layers: the experts' stacked matrices [experts, out, in].
  std::array<T*, kNumExpertMatrices> experts{};
  T* shared_expert_gate = nullptr;  // [C] (Architecture::shared_expert)
  // LoRA A [rank, in] and B [out, rank] per target; null when not targeted.
  std::array<T*, kNumBlockMatrices> lora_a{}, lora_b{};
  // The experts' LoRA stacks, A [experts, rank, in] and B [experts, out, rank].
  std::array<T*, kNumExpertMatrices> expert_lora_a{}, expert_lora_b{};
};

template <typename T>
struct ModelWeights {
  T* token_embd;  // null with a donor table (Config::donor_dim > 0)
  T* lens;  // lens.proj.weight [d_model, donor_dim], or null
  std::vector<LayerWeights<T>> layers;
  T* output_norm;
  T* output;  // == token_embd when tied

  // Pointers for every tensor; with allow_missing, tensors absent from
  // `layout` (frozen: no gradient) are null.
  static ModelWeights bind(const ParamLayout& layout, const Config& c, T* base, bool allow_missing = false);
};

}  // namespace ggtrain::model
