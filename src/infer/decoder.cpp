#include "infer/decoder.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "model/checkpoint.h"
#include "model/family_ops.h"
#include "model/params.h"
#include "model/quantized_base.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "util/error.h"

namespace ggtrain::infer {

Decoder::Decoder(const gguf::GgufFile& f, int64_t n_ctx, kernels::CacheType cache)
    : cfg_(model::config_from_gguf(f)),
      n_ctx_(n_ctx > 0 ? n_ctx : cfg_.ctx),
      threads_(omp_get_max_threads()),
      cache_type_(cache) {
  // Every tensor the model reads must have the shape its config implies: a
  // hostile file's smaller matrix would otherwise be read past its end.
  const model::ParamLayout layout(cfg_);
  auto checked = [&](const std::string& name) -> const gguf::TensorInfo& {
    return model::tensor_of_shape(f, layout.get(name));
  };
  build([&](const std::string& name) { return std::make_shared<const nn::PackedMatrix>(f, checked(name)); },
        [&](const std::string& name) { return quant::tensor_floats(f, checked(name)); },
        [&](const std::string& name, int64_t e, int64_t rows, int64_t cols) {
          const gguf::TensorInfo& t = checked(name);  // [experts, rows, cols]
          if (!nn::PackedMatrix::readable(t.type))
            fail("{}: tensor '{}' has type {}; inference reads {}", f.path(), name, gguf::type_name(t.type),
                 quant::codec_type_names());
          const size_t bytes = gguf::storage_bytes(t.type, size_t(rows * cols));
          return std::make_shared<const nn::PackedMatrix>(t.type, t.data + size_t(e) * bytes, rows, cols);
        });
}

Decoder::Decoder(const model::Config& cfg, const float* params, const model::QuantizedBase* quantized, int64_t n_ctx,
                 kernels::CacheType cache)
    : cfg_(cfg), n_ctx_(n_ctx > 0 ? n_ctx : cfg.ctx), threads_(omp_get_max_threads()), cache_type_(cache) {
  if (cfg.donor_dim > 0) fail("decoder: a model with a donor lens runs folded (model::fold_donor_model)");
  const model::ParamLayout layout(cfg, quantized ? quantized->names() : std::set<std::string>{});
  auto at = [&](const std::string& name) { return params + layout.get(name).offset; };
  build(
      [&](const std::string& name) {
        if (const model::HeldMatrix* h = quantized ? quantized->find(name) : nullptr)
          return std::make_shared<const nn::PackedMatrix>(h->type, h->rows.data, h->rows.rows, h->rows.cols);
        const auto& t = layout.get(name);
        return std::make_shared<const nn::PackedMatrix>(at(name), t.shape[0], t.shape[1]);
      },
      [&](const std::string& name) { return std::vector<float>(at(name), at(name) + layout.get(name).size); },
      [&](const std::string& name, int64_t e, int64_t rows, int64_t cols) {
        if (const model::HeldMatrix* h = quantized ? quantized->find(name) : nullptr)
          return std::make_shared<const nn::PackedMatrix>(h->type, h->expert(e, rows).data, rows, cols);
        return std::make_shared<const nn::PackedMatrix>(at(name) + e * rows * cols, rows, cols);
      });
  // A LoRA run's adapters, applied as a file's are (unmerged).
  if (cfg.lora.rank > 0) add_lora(model::lora_adapter_of(cfg, layout, params), 1.0);
}

template <typename Matrix, typename Vector, typename Expert>
void Decoder::build(Matrix matrix, Vector vec, Expert expert) {
  const auto embd = matrix("token_embd.weight");
  token_embd_ = nn::Embedding<float>::packed(embd);
  output_ = nn::Linear<float>::packed(cfg_.tied ? embd : matrix("output.weight"));
  output_norm_ = vec(cfg_.architecture().output_norm);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    auto n = [&](const char* what) { return model::block_tensor_name(l, what); };
    auto mat = [&](model::BlockMatrix m) {
      if (!model::layer_has_matrix(cfg_, l, m)) return nn::Linear<float>{};
      return nn::Linear<float>::packed(matrix(n(model::block_matrix_name(m))));
    };
    Layer& L = layers_.emplace_back();
    L.recipe = model::block_recipe(cfg_, l);
    for (size_t h = 0; h < 2; ++h) {
      L.norm[h] = vec(n(L.recipe.halves[h].norm));
      if (L.recipe.halves[h].post_norm) L.post_norm[h] = vec(n(L.recipe.halves[h].post_norm));
    }
    for (model::BlockMatrix m : {model::kAttnQ, model::kAttnK, model::kAttnV, model::kAttnOutput, model::kFfnGate,
                                 model::kFfnUp, model::kFfnDown})
      L.matrix(m) = mat(m);
    if (cfg_.has_shared_expert()) {
      layers_.back().shared_gate = mat(model::kFfnGateShexp);
      layers_.back().shared_up = mat(model::kFfnUpShexp);
      layers_.back().shared_down = mat(model::kFfnDownShexp);
      layers_.back().shared_expert_gate = vec(n(model::kSharedExpertGate));
    }
    if (cfg_.has_experts()) {
      layers_.back().router = mat(model::kFfnGateInp);
      for (int m = 0; m < model::kNumExpertMatrices; ++m)
        for (int64_t e = 0; e < cfg_.n_experts; ++e)
          layers_.back().experts[size_t(m)].push_back(
              nn::Linear<float>::packed(expert(n(model::expert_matrix_name(model::ExpertMatrix(m))), e,
                                               model::expert_matrix_shape(cfg_, model::ExpertMatrix(m)).first,
                                               model::expert_matrix_shape(cfg_, model::ExpertMatrix(m)).second)));
    }
    if (L.recipe.mixer().sublayer == model::Sublayer::kShortConv) {
      layers_.back().conv_in = mat(model::kConvInProj);
      layers_.back().conv_out = mat(model::kConvOutProj);
      layers_.back().conv_kernel = vec(n(model::kShortConvKernel));
      bcx_.resize(size_t(n_ctx_ * 3 * cfg_.d_model));
      continue;  // no attention tensors
    }
    if (L.recipe.mixer().sublayer == model::Sublayer::kGatedDeltaNet) {
      Layer& G = layers_.back();
      G.gdn_qkv = mat(model::kGdnQkv);
      G.gdn_gate = mat(model::kGdnGate);
      G.ssm_beta = mat(model::kSsmBeta);
      G.ssm_alpha = mat(model::kSsmAlpha);
      G.ssm_out = mat(model::kSsmOut);
      G.ssm_conv = vec(n("ssm_conv1d"));
      G.ssm_dt = vec(model::block_tensor_name(l, "ssm_dt", "bias"));
      G.ssm_a = vec(model::ssm_a_name(l));
      G.ssm_norm = vec(n("ssm_norm"));
      const kernels::GdnShape s = gdn_shape();
      gdn_window_.resize(size_t((s.taps - 1 + n_ctx_) * s.conv_dim()));
      for (auto* b : {&gdn_z_, &gdn_y_}) b->resize(size_t(n_ctx_ * s.value_dim()));
      for (auto* b : {&gdn_b_, &gdn_alpha_}) b->resize(size_t(n_ctx_ * s.n_v_heads));
      continue;
    }
    if (cfg_.architecture().qkv_bias) {
      auto bias = [&](const char* what) { return vec(model::block_tensor_name(l, what, "bias")); };
      layers_.back().bq = bias("attn_q");
      layers_.back().bk = bias("attn_k");
      layers_.back().bv = bias("attn_v");
    }
    if (cfg_.architecture().qk_norm) {
      layers_.back().attn_q_norm = vec(n("attn_q_norm"));
      layers_.back().attn_k_norm = vec(n("attn_k_norm"));
    }
  }
  const int64_t C = cfg_.d_model, F = cfg_.d_ff, N = n_ctx_;
  for (bool local : {false, true}) {
    if (local && cfg_.sliding_window == 0) break;
    auto& cs = local ? rope_cos_local_ : rope_cos_;
    auto& sn = local ? rope_sin_local_ : rope_sin_;
    cs.resize(size_t(N * cfg_.n_rot() / 2));
    sn.resize(cs.size());
    model::layer_rope_tables(cfg_, local, cs.data(), sn.data(), N);
  }
  for (int64_t t = 0; cfg_.sliding_window > 0 && t < N; ++t) window_start_.push_back(int32_t(cfg_.window_first_key(t)));
  for (auto* b : {&x_, &h_, &tmp_}) b->resize(size_t(N * C));
  for (auto* b : {&q_, &att_out_}) b->resize(size_t(N * cfg_.q_dim()));
  for (auto* b : {&k_, &v_}) b->resize(size_t(N * cfg_.kv_dim()));
  for (auto* b : {&gate_, &up_}) b->resize(size_t(N * F));
  if (cfg_.has_experts()) {
    const int64_t rows = std::min(N, kExpertChunk), pairs = rows * cfg_.n_experts_used;
    moe_probs_.resize(size_t(rows * cfg_.n_experts));
    for (auto* b : {&moe_weights_}) b->resize(size_t(pairs));
    for (auto* b : {&moe_x_, &moe_y_}) b->resize(size_t(pairs * C));
    for (auto* b : {&moe_gate_, &moe_up_}) b->resize(size_t(pairs * cfg_.expert_ff()));
    for (auto* b : {&moe_chosen_, &moe_row_of_}) b->resize(size_t(pairs));
    moe_offsets_.resize(size_t(cfg_.n_experts + 1));
    if (cfg_.has_shared_expert()) {
      for (auto* b : {&shared_gate_, &shared_up_}) b->resize(size_t(rows * cfg_.shared_ff()));
      shared_y_.resize(size_t(rows * C));
    }
  }
  rstd_.resize(size_t(N));
  if (cfg_.architecture().attn_output_gate) {
    q_full_.resize(size_t(N * 2 * cfg_.q_dim()));
    attn_gate_.resize(size_t(N * cfg_.q_dim()));
  }
  if (cfg_.architecture().qk_norm) head_rstd_.resize(size_t(N * cfg_.n_heads));
  lse_.resize(size_t(N * cfg_.n_heads));
  flash_scratch_.resize(size_t(threads_ * kernels::attention_scratch_per_thread(flash_shape(N))));
  decode_scratch_.resize(
      size_t(kernels::attention_decode_scratch(decode_shape(), kernels::cache_positions(n_ctx_), threads_)));
  // One row: generation reads the last position's logits only. eval(...,
  // all_logits) grows it to its rows (perplexity, scoring); sized for the
  // whole context up front it held 4096 x 262144 floats (4 GiB) for Gemma 3.
  logits_.resize(size_t(cfg_.vocab));
  seqs_.push_back(make_sequence());
}

Decoder::Sequence Decoder::make_sequence() const {
  // each mixer's state: keys and values for attention, the convolution's
  // history, the Gated DeltaNet's recurrent and convolution states
  std::vector<bool> attending;
  for (const Layer& L : layers_) attending.push_back(L.recipe.mixer().sublayer == model::Sublayer::kAttention);
  Sequence q{KvCache(cache_type_, attending, n_ctx_, decode_shape())};
  const kernels::GdnShape s = gdn_shape();
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const model::Sublayer mixer = layers_[size_t(l)].recipe.mixer().sublayer;
    if (mixer == model::Sublayer::kShortConv) {
      q.conv_history.resize(size_t(cfg_.n_layers));
      q.conv_history[size_t(l)].resize(size_t(n_ctx_ * cfg_.d_model));
    }
    if (mixer == model::Sublayer::kGatedDeltaNet) {
      q.gdn_state.resize(size_t(cfg_.n_layers));
      q.gdn_conv_state.resize(size_t(cfg_.n_layers));
      q.gdn_state[size_t(l)].assign(size_t(s.n_v_heads * s.d * s.d), 0.0f);
      q.gdn_conv_state[size_t(l)].assign(size_t((s.taps - 1) * s.conv_dim()), 0.0f);
    }
  }
  return q;
}

const Decoder::Sequence& Decoder::sequence(int64_t seq) const {
  if (seq < 0 || seq >= sequences()) fail("decoder: sequence {} of {}", seq, sequences());
  return seqs_[size_t(seq)];
}

void Decoder::set_sequences(int64_t n) {
  if (n < 1) fail("decoder: {} sequences", n);
  if (n < sequences()) seqs_.erase(seqs_.begin() + n, seqs_.end());
  while (sequences() < n) seqs_.push_back(make_sequence());
  // Only a decoder that batches sequences runs attention a thread per sequence.
  if (n > 1 && batch_scratch_.empty())
    batch_scratch_.resize(
        size_t(threads_ * kernels::attention_decode_scratch(decode_shape(), kernels::cache_positions(n_ctx_), 1)));
}

void Decoder::copy_sequence(int64_t from, int64_t to) {
  sequence(to);
  if (from == to) return;
  if (from == 0) restore_recurrent_state();
  if (to == 0) snapshots_.clear();  // sequence 0's history is replaced
  const Sequence& src = sequence(from);
  Sequence& dst = seqs_[size_t(to)];
  const int64_t n = src.cache.size();
  dst.cache.copy_prefix(src.cache, n);
  for (size_t l = 0; l < src.conv_history.size(); ++l)  // empty for the other layers
    if (!src.conv_history[l].empty())
      std::copy_n(src.conv_history[l].begin(), n * cfg_.d_model, dst.conv_history[l].begin());
  dst.gdn_state = src.gdn_state;
  dst.gdn_conv_state = src.gdn_conv_state;
  dst.gdn_position = src.gdn_position;
}

void Decoder::add_lora(const model::LoraAdapter& adapter_in, double user_scale) {
  const model::LoraAdapter& adapter = adapters_.emplace_back(adapter_in);
  int64_t max_rank = 0;
  for (const auto& p : adapter.pairs) max_rank = std::max(max_rank, p.rank);
  // rows of x A^T: a batch's tokens, or a chunk's (token, expert) pairs
  const int64_t rows = std::max(n_ctx_, cfg_.has_experts() ? std::min(n_ctx_, kExpertChunk) * cfg_.n_experts_used : 0);
  float* u = lora_u_.emplace_back(size_t(rows * max_rank)).data();
  for (const auto& p : adapter.pairs) {
    int64_t l = -1;
    int prefix = 0;
    const std::string& name = p.weight;
    if (std::sscanf(name.c_str(), "blk.%ld.%n", &l, &prefix) != 1 || prefix == 0 || l < 0 || l >= cfg_.n_layers ||
        !name.ends_with(".weight"))
      fail("LoRA: '{}' is not a block matrix of this model", name);
    Layer& L = layers_[size_t(l)];
    const std::string what = name.substr(size_t(prefix), name.size() - size_t(prefix) - 7);
    const double scale = adapter.scale_of(p, user_scale);
    if (const model::ExpertMatrix em = model::expert_matrix_from_name(what); em != model::kNumExpertMatrices) {
      auto& experts = L.experts[size_t(em)];
      if (experts.empty()) fail("LoRA: '{}' is not a matrix of this model", name);
      const int64_t in = experts[0].n_in(), out = experts[0].n_out(), E = int64_t(experts.size());
      if (p.rank <= 0 || p.experts != E || int64_t(p.a.size()) != E * p.rank * in ||
          int64_t(p.b.size()) != E * out * p.rank)
        fail("LoRA pair of rank {} for {} experts does not fit {} experts' [{}, {}] matrices", p.rank, p.experts, E,
             out, in);
      for (int64_t e = 0; e < E; ++e)  // each expert's own pair
        experts[size_t(e)].add_lora(
            {p.a.data() + e * p.rank * in, p.b.data() + e * out * p.rank, p.rank, float(scale), u});
      continue;
    }
    const model::BlockMatrix m = model::block_matrix_from_name(what);
    if (m == model::kNumBlockMatrices || !model::layer_has_matrix(cfg_, l, m))
      fail("LoRA: '{}' is not a block matrix of this model", name);
    nn::Linear<float>& w = L.matrix(m);
    if (p.rank <= 0 || int64_t(p.a.size()) != p.rank * w.n_in() || int64_t(p.b.size()) != w.n_out() * p.rank)
      fail("LoRA pair of rank {} does not fit a [{}, {}] matrix", p.rank, w.n_out(), w.n_in());
    w.add_lora({p.a.data(), p.b.data(), p.rank, float(scale), u});
  }
}

void Decoder::add_post_normed(const std::vector<float>& norm, int64_t n) {
  const int64_t C = cfg_.d_model;
  kernels::rmsnorm_forward(tmp_.data(), rstd_.data(), tmp_.data(), norm.data(), n, C, float(cfg_.rms_eps));
  kernels::residual_forward(x_.data(), x_.data(), tmp_.data(), n * C);
}

void Decoder::sublayer(int64_t l, model::Sublayer s, int64_t n) {
  switch (s) {
    case model::Sublayer::kAttention: return attention_mixer(l, n);
    case model::Sublayer::kShortConv: return conv_mixer(l, n);
    case model::Sublayer::kGatedDeltaNet: return gdn_mixer(l, n);
    case model::Sublayer::kDenseFfn: return dense_ffn(l, n);
    case model::Sublayer::kExperts: return experts(l, n);
  }
}

void Decoder::truncate(int64_t pos) {
  pos = pos < 0 ? 0 : pos;
  seqs_[0].cache.truncate(pos);
  // a state saved past the cut has seen tokens the cache no longer holds
  while (!snapshots_.empty() && snapshots_.back().position > pos) snapshots_.pop_back();
}

void Decoder::observe_matrix_inputs(std::function<void(const MatrixInput&)> observer) {
  observer_ = std::move(observer);
  weight_names_.clear();
  if (!observer_) return;
  weight_names_[&output_] = {cfg_.tied ? "token_embd.weight" : "output.weight", -1};
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    Layer& L = layers_[size_t(l)];
    for (int m = 0; m < model::kNumBlockMatrices; ++m)
      weight_names_[&L.matrix(model::BlockMatrix(m))] = {
          model::block_tensor_name(l, model::block_matrix_name(model::BlockMatrix(m))), -1};
    for (int m = 0; m < model::kNumExpertMatrices; ++m)
      for (size_t e = 0; e < L.experts[size_t(m)].size(); ++e)
        weight_names_[&L.experts[size_t(m)][e]] = {
            model::block_tensor_name(l, model::expert_matrix_name(model::ExpertMatrix(m))), int64_t(e)};
    weight_names_[&L.shared_expert_gate] = {model::block_tensor_name(l, model::kSharedExpertGate), -1};
  }
}

void Decoder::observe(const void* weight, const float* x, int64_t rows, int64_t cols) const {
  const auto it = weight_names_.find(weight);
  if (it != weight_names_.end()) observer_({it->second.first, it->second.second, x, rows, cols});
}

void Decoder::warmup() {
  // 16 tokens: fewer leave oneDNN's GEMM for larger batches cold (measured:
  // a 128-token prompt after a 2-token warmup ran at 2,300-2,500 tokens/s,
  // after a 16-token one at 8,400-8,800, s15 F32, 2 threads).
  const std::vector<int32_t> tokens(16, 0);
  reset();
  eval(tokens.data(), std::min<int64_t>(16, n_ctx_), false);
  reset();
}

void Decoder::eval(const int32_t* tokens, int64_t n, bool all_logits) {
  if (n <= 0) fail("decoder: nothing to evaluate");
  restore_recurrent_state();
  const int64_t pos = position();
  if (pos + n > n_ctx_) fail("decoder: {} tokens after {} exceed the context of {}", n, pos, n_ctx_);
  segments_.assign(1, {0, 0, n, pos});
  run(tokens, n, all_logits ? 0 : n - 1);
  if (n > 1) save_snapshot();
}

void Decoder::eval_batch(const int32_t* tokens, const int64_t* seq, int64_t n) {
  if (n <= 0) fail("decoder: nothing to evaluate");
  if (n > n_ctx_) fail("decoder: a batch of {} sequences exceeds the context of {}", n, n_ctx_);
  std::vector<bool> seen(seqs_.size());
  for (int64_t i = 0; i < n; ++i) {
    sequence(seq[i]);
    if (seen[size_t(seq[i])]) fail("decoder: sequence {} twice in one batch", seq[i]);
    seen[size_t(seq[i])] = true;
    if (seq[i] == 0) restore_recurrent_state();
    if (position(seq[i]) >= n_ctx_) fail("decoder: sequence {} holds the context of {}", seq[i], n_ctx_);
  }
  segments_.clear();
  for (int64_t i = 0; i < n; ++i) segments_.push_back({seq[i], i, 1, position(seq[i])});
  run(tokens, n, 0);
}

void Decoder::run(const int32_t* tokens, int64_t n, int64_t first_logit) {
  const int64_t C = cfg_.d_model;
  const float eps = float(cfg_.rms_eps);
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg_.vocab)
      fail("decoder: token {} is outside the vocabulary of {}", tokens[i], cfg_.vocab);
  token_embd_.forward(x_.data(), tokens, n);
  if (cfg_.architecture().embedding_scale)  // sqrtf(d_model), as llama.cpp
    kernels::scale_inplace(x_.data(), std::sqrt(float(C)), n * C);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const Layer& L = layers_[size_t(l)];
    for (size_t h = 0; h < 2; ++h) {  // x = x + post_norm(sublayer(norm(x)))
      kernels::rmsnorm_forward(h_.data(), rstd_.data(), x_.data(), L.norm[h].data(), n, C, eps);
      sublayer(l, L.recipe.halves[h].sublayer, n);
      if (L.recipe.halves[h].post_norm) add_post_normed(L.post_norm[h], n);
      else kernels::residual_forward(x_.data(), x_.data(), tmp_.data(), n * C);
    }
  }
  const int64_t rows = n - first_logit;
  if (logits_.size() < size_t(rows * cfg_.vocab)) logits_.resize(size_t(rows * cfg_.vocab));
  kernels::rmsnorm_forward(h_.data(), rstd_.data(), x_.data() + first_logit * C, output_norm_.data(), rows, C, eps);
  project(output_, h_.data(), logits_.data(), rows);
  for (const Segment& s : segments_) {
    Sequence& q = seqs_[size_t(s.seq)];
    q.cache.append(tokens + s.row, s.n);
    q.gdn_position = q.cache.size();
  }
}

}  // namespace ggtrain::infer
