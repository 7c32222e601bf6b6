// Transformer's memory, planned once at construction: every activation and
// scratch buffer carved from one allocation (sized by a first pass of the
// same plan), and the layers bound to their weights, gradients and scratch.
// The passes themselves are in transformer.cpp, each sublayer kind's (with
// its own activations' plan) in transformer_<kind>.cpp.
#include <algorithm>
#include <type_traits>

#include <fmt/format.h>

#include "kernels/attention.h"
#include "kernels/attention_bf16.h"
#include "model/quantized_base.h"
#include "model/transformer.h"
#include "util/error.h"

namespace ggtrain::model {

namespace {
const kernels::QuantRows* held_rows(const ModelOptions& o, const std::string& name) {
  const HeldMatrix* h = o.quantized ? o.quantized->find(name) : nullptr;
  return h ? &h->rows : nullptr;
}

}  // namespace

template <typename T>
void Transformer<T>::size_band_scratch() {
  for (int64_t l = 0; l < cfg_.n_layers; ++l)
    for (int t = 0; t < kNumBlockMatrices; ++t)
      if (const auto* m = held_rows(opts_, block_tensor_name(l, block_matrix_name(BlockMatrix(t)))))
        band_scratch_size_ = std::max(band_scratch_size_, m->rows * m->cols);
  for (int64_t l = 0; cfg_.has_experts() && l < cfg_.n_layers; ++l)
    for (int m = 0; m < kNumExpertMatrices; ++m)
      if (held_rows(opts_, block_tensor_name(l, expert_matrix_name(ExpertMatrix(m))))) {
        const auto [n_out, n_in] = expert_matrix_shape(cfg_, ExpertMatrix(m));
        band_scratch_size_ = std::max(band_scratch_size_, n_out * n_in);  // one expert's matrix
      }
  const auto* head = held_rows(opts_, cfg_.tied ? "token_embd.weight" : "output.weight");
  if (head) band_scratch_size_ = std::max(band_scratch_size_, std::min<int64_t>(head->rows, 1024) * head->cols);
}

template <typename T>
void Transformer<T>::bind_layers() {
  const int64_t C = cfg_.d_model;
  auto linear = [&](const std::string& name, const T* w, T* grad, int64_t n_out, int64_t n_in) {
    if constexpr (std::is_same_v<T, float>) {
      if (const auto* m = held_rows(opts_, name)) return nn::Linear<T>::held(*m, band_scratch_, band_scratch_size_);
    }
    return nn::Linear<T>::dense(w, grad, n_out, n_in, bf16_shadow(w));
  };
  // A matrix's weights and gradient by name: null when held quantized
  // (no weights here) or frozen (no gradient).
  auto in = [](const ParamLayout& layout, T* base, const std::string& name) -> T* {
    const ParamTensor* t = layout.find(name);
    return t ? base + t->offset : nullptr;
  };
  proj_.assign(size_t(cfg_.n_layers), {});
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const auto &w = w_.layers[size_t(l)], &g = g_.layers[size_t(l)];
    for (int t = 0; t < kNumBlockMatrices; ++t) {
      if (!layer_has_matrix(cfg_, l, BlockMatrix(t))) continue;
      const auto [n_out, n_in] = block_matrix_shape(cfg_, BlockMatrix(t));
      const std::string name = block_tensor_name(l, block_matrix_name(BlockMatrix(t)));
      auto& p = proj_[size_t(l)][size_t(t)];
      p = linear(name, in(layout_, params_.data(), name), in(grad_layout_, grads_.data(), name), n_out, n_in);
      if (w.lora_a[t])
        p.add_lora({w.lora_a[t], w.lora_b[t], cfg_.lora.rank, T(cfg_.lora.scale()), layer_acts_[size_t(l)].lora_u[t],
                    g.lora_a[t], g.lora_b[t], d_lora_u_, bf16_shadow(w.lora_a[t]), d_lora_u_h_,
                    bf16_shadow(w.lora_b[t])});
    }
  }
  experts_.assign(size_t(cfg_.n_layers), {});
  for (int64_t l = 0; cfg_.has_experts() && l < cfg_.n_layers; ++l)
    for (int m = 0; m < kNumExpertMatrices; ++m) {
      const auto [n_out, n_in] = expert_matrix_shape(cfg_, ExpertMatrix(m));
      const std::string name = block_tensor_name(l, expert_matrix_name(ExpertMatrix(m)));
      T *w = in(layout_, params_.data(), name), *g = in(grad_layout_, grads_.data(), name);
      const HeldMatrix* held = opts_.quantized ? opts_.quantized->find(name) : nullptr;
      for (int64_t e = 0; e < cfg_.n_experts; ++e) {
        const int64_t at = e * n_out * n_in;
        auto& views = experts_[size_t(l)][size_t(m)];
        if constexpr (std::is_same_v<T, float>) {
          if (held) {  // the expert's rows stay in their blocks, like any held matrix
            views.push_back(nn::Linear<T>::held(held->expert(e, n_out), band_scratch_, band_scratch_size_));
            continue;
          }
        }
        views.push_back(nn::Linear<T>::dense(w + at, g ? g + at : nullptr, n_out, n_in, bf16_shadow(w + at)));
      }
      // Each expert's own adapter: its slices of the stacked A and B (its
      // rows of x A^T move with each batch's grouping: expert_project).
      const auto &wl = w_.layers[size_t(l)], &gl = g_.layers[size_t(l)];
      T *la = wl.expert_lora_a[size_t(m)], *lb = wl.expert_lora_b[size_t(m)];
      T *ga = gl.expert_lora_a[size_t(m)], *gb = gl.expert_lora_b[size_t(m)];
      const int64_t r = cfg_.lora.rank;
      for (int64_t e = 0; la && e < cfg_.n_experts; ++e)
        experts_[size_t(l)][size_t(m)][size_t(e)].add_lora(
            {la + e * r * n_in, lb + e * n_out * r, r, T(cfg_.lora.scale()),
             layer_acts_[size_t(l)].expert_lora_u[size_t(m)], ga ? ga + e * r * n_in : nullptr,
             gb ? gb + e * n_out * r : nullptr, d_lora_u_, bf16_shadow(la + e * r * n_in), d_lora_u_h_,
             bf16_shadow(lb + e * n_out * r)});
    }
  if (cfg_.donor_dim > 0) {  // the lens runs in fp32 whatever the precision
    lens_ = nn::Linear<T>::dense(w_.lens, g_.lens, C, cfg_.donor_dim);
  } else if (const auto* m = held_rows(opts_, "token_embd.weight")) {
    if constexpr (std::is_same_v<T, float>) token_embd_ = nn::Embedding<T>::held(*m);
  } else {
    token_embd_ = nn::Embedding<T>::dense(w_.token_embd, g_.token_embd, cfg_.vocab, C);
  }
  head_ = linear(cfg_.tied ? "token_embd.weight" : "output.weight", w_.output, d_head_, cfg_.vocab, C);
}

template <typename T>
GemmIn<T> Transformer<T>::take_gemm_in(BumpPlan<T>& p, int64_t n) const {
  GemmIn<T> g;
  if (bf16_)
    g.bf16 = reinterpret_cast<kernels::bf16*>(
        p.take((n * int64_t(sizeof(kernels::bf16)) + int64_t(sizeof(T)) - 1) / int64_t(sizeof(T))));
  else g.fp32 = p.take(n);
  return g;
}

// The activations of one block: the attention part and/or the feed-forward part.
template <typename T>
void Transformer<T>::plan_layer_acts(BumpPlan<T>& p, LayerActs<T>& a, Mixers mixer_part, bool ffn_part) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model;
  if (mixer_part.any()) {
    a.rstd_attn = p.take(BT);
    a.h_attn = take_gemm_in(p, BT * C);
  }
  if (mixer_part.gated_deltanet) plan_gdn_acts(p, a);
  if (mixer_part.short_conv) plan_conv_acts(p, a);
  if (mixer_part.attention) plan_attention_acts(p, a);
  if (ffn_part) {
    a.x_mid = p.take(BT * C);
    a.rstd_ffn = p.take(BT);
    a.h_ffn = take_gemm_in(p, BT * C);
    if (cfg_.has_experts()) {
      plan_expert_acts(p, a);
    } else {
      plan_dense_ffn_acts(p, a);
    }
    if (cfg_.architecture().post_norms) {
      a.attn_proj = p.take(BT * C);
      a.rstd_attn_post = p.take(BT);
      a.ffn_proj = p.take(BT * C);
      a.rstd_ffn_post = p.take(BT);
    }
  }
}

// Lays out every activation and scratch buffer. Called twice: to size the
// single allocation, then to point into it. Buffers that backward recomputes
// are planned once and shared by every block.
template <typename T>
void Transformer<T>::plan(BumpPlan<T>& p) {
  const int64_t BT = batch_ * seq_len_, C = cfg_.d_model, V = cfg_.vocab;
  const int64_t QD = cfg_.q_dim(), KD = cfg_.kv_dim();
  // the feed-forward's hidden values per token: d_ff, or k experts' worth
  // (the shared expert's take the same buffers after the routed experts')
  const int64_t F = !cfg_.has_experts()        ? cfg_.d_ff
                    : cfg_.has_shared_expert() ? std::max(cfg_.n_experts_used * cfg_.expert_ff(), cfg_.shared_ff())
                                               : cfg_.n_experts_used * cfg_.expert_ff();
  residual_.assign(size_t(cfg_.n_layers + 1), nullptr);
  for (auto& r : residual_) r = p.take(BT * C);
  if (cfg_.donor_dim > 0) x_donor_ = p.take(BT * cfg_.donor_dim);
  const bool share_attn = opts_.recompute != Recompute::kNone;
  const bool share_ffn = opts_.recompute == Recompute::kAll;
  const Mixers present = model_mixers();
  LayerActs<T> shared{};
  plan_layer_acts(p, shared, share_attn ? present : Mixers{false, false, false}, share_ffn);
  layer_acts_.assign(size_t(cfg_.n_layers), {});
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    auto& a = layer_acts_[size_t(l)];
    a = shared;
    plan_layer_acts(p, a, share_attn ? Mixers{false, false, false} : mixers_of(l), !share_ffn);
    for (const auto& target : cfg_.lora.targets) {
      for (int t = 0; t < kNumBlockMatrices; ++t)
        if (target == block_matrix_name(BlockMatrix(t)) && layer_has_matrix(cfg_, l, BlockMatrix(t)))
          a.lora_u[size_t(t)] = p.take(BT * cfg_.lora.rank);
      const ExpertMatrix e = expert_matrix_from_name(target);
      if (e != kNumExpertMatrices) a.expert_lora_u[size_t(e)] = p.take(routing_shape().pairs() * cfg_.lora.rank);
    }
  }
  rstd_final_ = p.take(BT);
  h_final_ = take_gemm_in(p, BT * C);
  lse_ = p.take(BT);
  losses_ = p.take(BT);
  logit_chunk_ = p.take(chunk_rows_ * V);
  if (bf16_) logit_chunk_h_ = take_gemm_in(p, chunk_rows_ * V).bf16;
  head_h_ = take_gemm_in(p, chunk_rows_ * C);
  head_losses_ = p.take(chunk_rows_);
  head_lse_ = p.take(chunk_rows_);
  head_dh_ = p.take(chunk_rows_ * C);
  head_targets_.resize(size_t(chunk_rows_));
  head_rows_.reserve(size_t(BT));
  if (grad_layout_.find(cfg_.tied ? "token_embd.weight" : "output.weight")) d_head_ = p.take(V * C);  // trainable head
  const int64_t rope_floats = seq_len_ * cfg_.n_rot() / 2;
  rope_cos_ = p.take(rope_floats);
  rope_sin_ = p.take(rope_floats);
  rope_cos_local_ = cfg_.sliding_window > 0 ? p.take(rope_floats) : rope_cos_;
  rope_sin_local_ = cfg_.sliding_window > 0 ? p.take(rope_floats) : rope_sin_;
  attn_scratch_ = p.take(int64_t(n_threads_) * (bf16_attention() ? attention_bf16_scratch_per_thread(attn_shape_)
                                                                 : attention_scratch_per_thread(attn_shape_)));
  d_res_ = p.take(BT * C);
  d_normed_ = p.take(BT * C);
  d_h_final_ = d_normed_;  // written by forward, read first by backward; d_h_ is free until then
  d_q_ = p.take(BT * QD);
  d_k_ = p.take(BT * KD);
  d_v_ = p.take(BT * KD);
  d_attn_out_ = p.take(BT * QD);
  if (cfg_.architecture().qk_norm) {
    d_q_raw_ = p.take(BT * QD);
    d_k_raw_ = p.take(BT * KD);
  }
  d_gate_ = take_gemm_in(p, BT * F);
  d_up_ = take_gemm_in(p, BT * F);
  if (gated_attention()) {
    d_q_full_ = p.take(BT * 2 * QD);
    d_attn_gate_ = p.take(BT * QD);
  }
  if (bf16_) {
    d_res_h_ = take_gemm_in(p, BT * C).bf16;
    d_q_h_ = take_gemm_in(p, BT * cfg_.q_proj_dim()).bf16;
    d_k_h_ = take_gemm_in(p, BT * KD).bf16;
    d_v_h_ = take_gemm_in(p, BT * KD).bf16;
  }
  d_act_ = p.take(BT * F);
  if (band_scratch_size_ > 0) band_scratch_ = p.take(band_scratch_size_);
  if (cfg_.lora.rank > 0) {  // [BT, rank], or an expert target's [BT k, rank]
    const int64_t lora_rows = cfg_.has_experts() ? routing_shape().pairs() : BT;
    d_lora_u_ = p.take(lora_rows * cfg_.lora.rank);
    if (bf16_) d_lora_u_h_ = take_gemm_in(p, lora_rows * cfg_.lora.rank).bf16;
  }
  if (present.gated_deltanet) plan_gdn_grads(p);
  if (cfg_.has_experts()) plan_expert_grads(p);
  if (present.short_conv) plan_conv_grads(p);
}

// Explicit instantiations of the members defined here (the class itself is
// instantiated in transformer.cpp).
template void Transformer<float>::size_band_scratch();
template void Transformer<float>::bind_layers();
template GemmIn<float> Transformer<float>::take_gemm_in(BumpPlan<float>&, int64_t) const;
template void Transformer<float>::plan_layer_acts(BumpPlan<float>&, LayerActs<float>&, Mixers, bool);
template void Transformer<float>::plan(BumpPlan<float>&);
template void Transformer<double>::size_band_scratch();
template void Transformer<double>::bind_layers();
template GemmIn<double> Transformer<double>::take_gemm_in(BumpPlan<double>&, int64_t) const;
template void Transformer<double>::plan_layer_acts(BumpPlan<double>&, LayerActs<double>&, Mixers, bool);
template void Transformer<double>::plan(BumpPlan<double>&);

}  // namespace ggtrain::model
