#pragma once
// The Llama decoder, written the way llm.c writes GPT-2: explicit forward and
// backward passes over buffers that are planned once, at construction, from
// (config, batch, seq_len). Nothing is allocated per step.
//
// T is float for training; double exists for finite-difference checks.
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "model/config.h"
#include "model/params.h"
#include "util/aligned_buffer.h"

namespace ggtrain::model {

template <typename T>
struct LayerActs {
  T* rstd_attn;  // [BT]
  T* h_attn;     // [BT, C]   normed input of attention
  T* q;          // [BT, q_dim]  after RoPE
  T* k;          // [BT, kv_dim] after RoPE
  T* v;          // [BT, kv_dim]
  T* att;        // [B, H, T, T] softmax probabilities
  T* attn_out;   // [BT, q_dim] heads concatenated, before attn_output
  T* x_mid;      // [BT, C]   residual stream after attention
  T* rstd_ffn;   // [BT]
  T* h_ffn;      // [BT, C]
  T* gate;       // [BT, F]
  T* up;         // [BT, F]
  T* act;        // [BT, F]   silu(gate) * up
  std::array<T*, kNumLoraTargets> lora_u{};  // [BT, rank] x A^T per LoRA target, or null
};

template <typename T>
class LlamaModel {
 public:
  // `frozen`: parameter names that keep their values; they get no gradient
  // buffer (grad_layout() lacks them) and backward() skips their gradients.
  LlamaModel(const LlamaConfig& cfg, int64_t batch, int64_t seq_len,
             const std::set<std::string>& frozen = {});

  const LlamaConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  // Layout of grads() (and of the optimizer moments): the trainable tensors.
  const ParamLayout& grad_layout() const { return grad_layout_; }
  int64_t n_trainable() const { return grad_layout_.total(); }
  int64_t batch() const { return B_; }
  int64_t seq_len() const { return T_; }
  T* params() { return params_.data(); }
  const T* params() const { return params_.data(); }
  T* grads() { return grads_.data(); }
  const T* grads() const { return grads_.data(); }
  int64_t n_params() const { return layout_.total(); }
  // The frozen donor table E [vocab, donor_dim] of a warm start (fill it
  // before forward); null when config().donor_dim == 0.
  T* donor_table() { return donor_.size() ? donor_.data() : nullptr; }
  size_t activation_bytes() const { return acts_.size() * sizeof(T); }

  // inputs, targets: [B, T] token ids (targets may be null: logits only).
  // Returns the mean cross-entropy over all B*T positions (0 without targets).
  T forward(const int32_t* inputs, const int32_t* targets);
  // [B, T, vocab], valid after forward() until backward().
  const T* logits() const { return logits_; }
  void zero_grad();
  // Adds d(loss_scale * mean loss)/d(params) to grads(); turns the logits
  // into their gradient in place. Needs a forward() with targets.
  void backward(T loss_scale = T(1));
  // Called by backward() as soon as block l's gradients are final (blocks
  // finish from the last to the first), so that data-parallel training can
  // start reducing them while the blocks below still compute.
  std::function<void(int64_t l)> on_layer_grads;

 private:
  void plan(BumpPlan<T>& p);
  void layer_forward(int64_t l, const T* x_in, T* x_out);
  void layer_backward(int64_t l, const T* x_in, T* d_res);
  void check_tokens(const int32_t* tokens, const char* what) const;
  // The LoRA branch of target t in layer l (nothing when it is not a target):
  // out += s (inp A^T) B^T, and its backward (dinp accumulated).
  void lora_fwd(int64_t l, LoraTarget t, T* out, const T* inp, int64_t n_in, int64_t n_out);
  void lora_bwd(int64_t l, LoraTarget t, T* dinp, const T* dout, const T* inp, int64_t n_in,
                int64_t n_out);

  LlamaConfig cfg_;
  ParamLayout layout_, grad_layout_;
  int64_t B_, T_;
  int n_threads_;
  AlignedBuffer<T> params_, grads_, acts_, donor_;
  ModelWeights<T> w_, g_;
  kernels::AttnShape attn_shape_;

  // activations
  std::vector<T*> residual_;  // n_layers + 1 of [BT, C]; [0] is the embedding
  T* x_donor_ = nullptr;       // [BT, donor_dim] donor rows of the inputs (warm start)
  std::vector<LayerActs<T>> layer_acts_;
  T *rstd_final_, *h_final_, *logits_, *lse_, *losses_;
  T *rope_cos_, *rope_sin_;
  // backward scratch, shared by all layers
  T *d_res_, *d_h_, *d_q_, *d_k_, *d_v_, *d_attn_out_, *d_gate_, *d_up_, *d_act_, *d_scores_;
  T* d_lora_u_ = nullptr;  // [BT, rank]
  const int32_t* inputs_ = nullptr;
  const int32_t* targets_ = nullptr;
};

extern template class LlamaModel<float>;
extern template class LlamaModel<double>;

}  // namespace ggtrain::model
