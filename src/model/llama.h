#pragma once
// The Llama decoder, written the way llm.c writes GPT-2: explicit forward and
// backward passes over buffers that are planned once, at construction, from
// (config, batch, seq_len). Nothing is allocated per step.
//
// T is float for training; double exists for finite-difference checks.
#include <cstdint>
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
};

template <typename T>
class LlamaModel {
 public:
  LlamaModel(const LlamaConfig& cfg, int64_t batch, int64_t seq_len);

  const LlamaConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
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

 private:
  void plan(BumpPlan<T>& p);
  void layer_forward(int64_t l, const T* x_in, T* x_out);
  void layer_backward(int64_t l, const T* x_in, T* d_res);
  void check_tokens(const int32_t* tokens, const char* what) const;

  LlamaConfig cfg_;
  ParamLayout layout_;
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
  const int32_t* inputs_ = nullptr;
  const int32_t* targets_ = nullptr;
};

extern template class LlamaModel<float>;
extern template class LlamaModel<double>;

}  // namespace ggtrain::model
