#include "model/params.h"

#include <fmt/format.h>

#include "util/error.h"

namespace ggtrain::model {

ParamLayout::ParamLayout(const LlamaConfig& c) {
  const int64_t C = c.d_model;
  if (c.donor_dim > 0)
    add("lens.proj.weight", {C, c.donor_dim});
  else
    add("token_embd.weight", {c.vocab, C});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    auto n = [&](const char* what) { return fmt::format("blk.{}.{}.weight", l, what); };
    add(n("attn_norm"), {C});
    add(n("attn_q"), {c.q_dim(), C});
    add(n("attn_k"), {c.kv_dim(), C});
    add(n("attn_v"), {c.kv_dim(), C});
    add(n("attn_output"), {C, c.q_dim()});
    add(n("ffn_norm"), {C});
    add(n("ffn_gate"), {c.d_ff, C});
    add(n("ffn_up"), {c.d_ff, C});
    add(n("ffn_down"), {C, c.d_ff});
  }
  add("output_norm.weight", {C});
  if (!c.tied) add("output.weight", {c.vocab, C});
}

void ParamLayout::add(const std::string& name, std::vector<int64_t> shape) {
  ParamTensor t;
  t.name = name;
  t.size = 1;
  for (auto d : shape) t.size *= d;
  t.decay = shape.size() == 2;
  t.shape = std::move(shape);
  // Keep every tensor 64-byte aligned (16 floats) for vector loads.
  t.offset = (total_ + 15) / 16 * 16;
  total_ = t.offset + t.size;
  tensors_.push_back(std::move(t));
}

const ParamTensor* ParamLayout::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const ParamTensor& ParamLayout::get(const std::string& name) const {
  const auto* t = find(name);
  if (!t) fail("model has no parameter '{}'", name);
  return *t;
}

template <typename T>
ModelWeights<T> ModelWeights<T>::bind(const ParamLayout& layout, const LlamaConfig& c, T* base) {
  auto at = [&](const std::string& name) { return base + layout.get(name).offset; };
  ModelWeights w;
  w.token_embd = c.donor_dim > 0 ? nullptr : at("token_embd.weight");
  w.lens = c.donor_dim > 0 ? at("lens.proj.weight") : nullptr;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    auto n = [&](const char* what) { return at(fmt::format("blk.{}.{}.weight", l, what)); };
    w.layers.push_back({n("attn_norm"), n("attn_q"), n("attn_k"), n("attn_v"), n("attn_output"),
                        n("ffn_norm"), n("ffn_gate"), n("ffn_up"), n("ffn_down")});
  }
  w.output_norm = at("output_norm.weight");
  w.output = c.tied ? w.token_embd : at("output.weight");
  return w;
}

template struct ModelWeights<float>;
template struct ModelWeights<double>;

}  // namespace ggtrain::model
