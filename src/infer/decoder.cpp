#include "infer/decoder.h"

#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/vexp.h"
#include "model/quantized_base.h"
#include "util/error.h"

namespace ggtrain::infer {

Decoder::Decoder(const gguf::GgufFile& f, int64_t n_ctx)
    : cfg_(model::config_from_llama_gguf(f)), n_ctx_(n_ctx > 0 ? n_ctx : cfg_.ctx) {
  build([&](const std::string& name) { return WeightMatrix(f, f.tensor(name)); },
        [&](const std::string& name) { return f.to_float(f.tensor(name)); });
}

Decoder::Decoder(const model::LlamaConfig& cfg, const float* params, const model::QuantizedBase* quantized,
                 int64_t n_ctx)
    : cfg_(cfg), n_ctx_(n_ctx > 0 ? n_ctx : cfg.ctx) {
  if (cfg.donor_dim > 0) fail("decoder: a model with a donor lens runs folded (model::fold_donor_model)");
  const model::ParamLayout layout(cfg, quantized ? quantized->names() : std::set<std::string>{});
  auto at = [&](const std::string& name) { return params + layout.get(name).offset; };
  build(
      [&](const std::string& name) {
        if (const kernels::Q8Rows* q = quantized ? quantized->find(name) : nullptr) return WeightMatrix(*q);
        const auto& t = layout.get(name);
        return WeightMatrix(at(name), t.shape[0], t.shape[1]);
      },
      [&](const std::string& name) { return std::vector<float>(at(name), at(name) + layout.get(name).size); });
  // A LoRA run's adapters, applied as a file's are (unmerged).
  if (cfg.lora.rank > 0) add_lora(model::lora_adapter_of(cfg, layout, params), 1.0);
}

template <typename Matrix, typename Vector>
void Decoder::build(Matrix matrix, Vector vec) {
  token_embd_ = matrix("token_embd.weight");
  if (!cfg_.tied) output_ = matrix("output.weight");
  output_norm_ = vec("output_norm.weight");
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    auto n = [&](const char* what) { return fmt::format("blk.{}.{}.weight", l, what); };
    auto mat = [&](model::BlockMatrix m) { return matrix(n(model::block_matrix_name(m))); };
    layers_.push_back({vec(n("attn_norm")), vec(n("ffn_norm")), mat(model::kAttnQ), mat(model::kAttnK),
                       mat(model::kAttnV), mat(model::kAttnOutput), mat(model::kFfnGate), mat(model::kFfnUp),
                       mat(model::kFfnDown)});
  }
  const int64_t C = cfg_.d_model, F = cfg_.d_ff, N = n_ctx_;
  k_cache_.assign(size_t(cfg_.n_layers * N * cfg_.kv_dim()), 0.f);
  v_cache_.assign(k_cache_.size(), 0.f);
  rope_cos_.resize(size_t(N * cfg_.d_head() / 2));
  rope_sin_.resize(rope_cos_.size());
  kernels::rope_tables(rope_cos_.data(), rope_sin_.data(), N, cfg_.d_head(), cfg_.rope_freq_base);
  for (auto* b : {&x_, &h_, &tmp_}) b->resize(size_t(N * C));
  for (auto* b : {&q_, &att_out_}) b->resize(size_t(N * cfg_.q_dim()));
  for (auto* b : {&k_, &v_}) b->resize(size_t(N * cfg_.kv_dim()));
  for (auto* b : {&gate_, &up_}) b->resize(size_t(N * F));
  rstd_.resize(size_t(N));
  scores_.resize(size_t(omp_get_max_threads()) * size_t(N));
  lse_.resize(size_t(N * cfg_.n_heads));
  flash_scratch_.resize(size_t(omp_get_max_threads() * kernels::attention_scratch_per_thread(flash_shape(N))));
  logits_.resize(size_t(N * cfg_.vocab));
}

void Decoder::add_lora(const model::LoraAdapter& adapter, double user_scale) {
  for (const auto& p : adapter.pairs) {
    int64_t l = -1;
    char what[32] = {};
    if (std::sscanf(p.weight.c_str(), "blk.%ld.%31[a-z_].weight", &l, what) != 2 || l < 0 || l >= cfg_.n_layers)
      fail("LoRA: '{}' is not a block matrix of this model", p.weight);
    Layer& L = layers_[size_t(l)];
    const model::BlockMatrix m = model::block_matrix_from_name(what);
    if (m == model::kNumBlockMatrices) fail("LoRA: '{}' is not a block matrix of this model", p.weight);
    L.matrix(m).add_lora(p.a, p.b, p.rank, float(adapter.scale_of(p, user_scale)));
  }
}

kernels::AttnShape Decoder::flash_shape(int64_t n) const {
  return {1, n, cfg_.n_heads, cfg_.n_kv_heads, cfg_.d_head()};
}

// Causal attention of the n new queries against the cache. A prompt into an
// empty cache is the training forward's causal attention: its tiled flash
// kernel. Otherwise (decode, or a prompt after a kept prefix) per query and
// head over the cache.
void Decoder::attention(int64_t l, int64_t n) {
  const int64_t hd = cfg_.d_head(), QD = cfg_.q_dim(), KD = cfg_.kv_dim();
  if (pos_ == 0 && n >= kFlashPrompt) {
    const float* kc = k_cache_.data() + l * n_ctx_ * KD;
    const float* vc = v_cache_.data() + l * n_ctx_ * KD;
    kernels::attention_forward(att_out_.data(), lse_.data(), flash_scratch_.data(), q_.data(), kc, vc,
                               flash_shape(n));
    return;
  }
  const int64_t group = cfg_.n_heads / cfg_.n_kv_heads;
  const float* kc = k_cache_.data() + l * n_ctx_ * KD;
  const float* vc = v_cache_.data() + l * n_ctx_ * KD;
  const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel for collapse(2) schedule(static) \
    if (cfg_.n_heads * n * (pos_ + n) * hd >= kernels::kMinParallelWork)
  for (int64_t h = 0; h < cfg_.n_heads; ++h)
    for (int64_t i = 0; i < n; ++i) {
      float* s = scores_.data() + int64_t(omp_get_thread_num()) * n_ctx_;
      const int64_t p = pos_ + i, g = h / group;
      const float* qi = q_.data() + i * QD + h * hd;
      float maxv = -INFINITY;
      for (int64_t j = 0; j <= p; ++j) {
        const float* kj = kc + j * KD + g * hd;
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < hd; ++d) dot += qi[d] * kj[d];
        s[j] = dot * scale;
        maxv = std::max(maxv, s[j]);
      }
      const float sum = kernels::exp_shift_sum(s, p + 1, maxv);  // vectorised (std::exp per key)
      float* o = att_out_.data() + i * QD + h * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t j = 0; j <= p; ++j) {
        const float w = s[j] / sum;
        const float* vj = vc + j * KD + g * hd;
#pragma omp simd
        for (int64_t d = 0; d < hd; ++d) o[d] += w * vj[d];
      }
    }
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
  if (pos_ + n > n_ctx_) fail("decoder: {} tokens after {} exceed the context of {}", n, pos_, n_ctx_);
  const int64_t C = cfg_.d_model, F = cfg_.d_ff, KD = cfg_.kv_dim(), hd = cfg_.d_head();
  const float eps = float(cfg_.rms_eps);
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= cfg_.vocab)
      fail("decoder: token {} is outside the vocabulary of {}", tokens[i], cfg_.vocab);
    token_embd_.row(tokens[i], x_.data() + i * C);
  }
  const float* cs = rope_cos_.data() + pos_ * hd / 2;
  const float* sn = rope_sin_.data() + pos_ * hd / 2;
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const Layer& L = layers_[size_t(l)];
    kernels::rmsnorm_forward(h_.data(), rstd_.data(), x_.data(), L.attn_norm.data(), n, C, eps);
    L.wq.matmul(h_.data(), q_.data(), n);
    L.wk.matmul(h_.data(), k_.data(), n);
    L.wv.matmul(h_.data(), v_.data(), n);
    kernels::rope_forward(q_.data(), cs, sn, 1, n, cfg_.n_heads, hd);
    kernels::rope_forward(k_.data(), cs, sn, 1, n, cfg_.n_kv_heads, hd);
    float* kc = k_cache_.data() + (l * n_ctx_ + pos_) * KD;
    float* vc = v_cache_.data() + (l * n_ctx_ + pos_) * KD;
    std::memcpy(kc, k_.data(), size_t(n * KD) * 4);
    std::memcpy(vc, v_.data(), size_t(n * KD) * 4);
    attention(l, n);
    L.wo.matmul(att_out_.data(), tmp_.data(), n);
    kernels::residual_forward(x_.data(), x_.data(), tmp_.data(), n * C);
    kernels::rmsnorm_forward(h_.data(), rstd_.data(), x_.data(), L.ffn_norm.data(), n, C, eps);
    L.w_gate.matmul(h_.data(), gate_.data(), n);
    L.w_up.matmul(h_.data(), up_.data(), n);
    kernels::swiglu_forward(gate_.data(), gate_.data(), up_.data(), n * F);
    L.w_down.matmul(gate_.data(), tmp_.data(), n);
    kernels::residual_forward(x_.data(), x_.data(), tmp_.data(), n * C);
  }
  const int64_t first = all_logits ? 0 : n - 1, rows = n - first;
  kernels::rmsnorm_forward(h_.data(), rstd_.data(), x_.data() + first * C, output_norm_.data(), rows, C, eps);
  (cfg_.tied ? token_embd_ : output_).matmul(h_.data(), logits_.data(), rows);
  pos_ += n;
}

}  // namespace ggtrain::infer
