#include "model/params.h"

#include <fmt/format.h>

#include "util/error.h"

namespace ggtrain::model {

namespace {
// [out, in] of a block matrix, by its llama.cpp name.
std::pair<int64_t, int64_t> lora_target_shape(const LlamaConfig& c, const std::string& target) {
  const int64_t C = c.d_model;
  if (target == "attn_q") return {c.q_dim(), C};
  if (target == "attn_k" || target == "attn_v") return {c.kv_dim(), C};
  if (target == "attn_output") return {C, c.q_dim()};
  if (target == "ffn_gate" || target == "ffn_up") return {c.d_ff, C};
  if (target == "ffn_down") return {C, c.d_ff};
  fail("model: '{}' is not a LoRA target (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down)",
       target);
}
}  // namespace

ParamLayout::ParamLayout(const LlamaConfig& c, const std::set<std::string>& held_elsewhere) {
  const int64_t C = c.d_model;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    if (!held_elsewhere.count(name)) this->add(name, std::move(shape));
  };
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
  // LoRA tensors come last, so the base tensors keep the offsets of the
  // plain model's layout (a base GGUF loads into the same places).
  for (int64_t l = 0; c.lora.rank > 0 && l < c.n_layers; ++l)
    for (const auto& target : c.lora.targets) {
      const auto [out, in] = lora_target_shape(c, target);
      const std::string w = fmt::format("blk.{}.{}.weight", l, target);
      add(w + ".lora_a", {c.lora.rank, in});
      add(w + ".lora_b", {out, c.lora.rank});
    }
}

const char* lora_target_name(LoraTarget t) {
  static const char* names[kNumLoraTargets] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                               "ffn_gate", "ffn_up", "ffn_down"};
  return names[t];
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
  t.source_offset = t.offset;
  total_ = t.offset + t.size;
  tensors_.push_back(std::move(t));
}

ParamLayout ParamLayout::trainable(const std::set<std::string>& frozen) const {
  ParamLayout out;
  for (const auto& t : tensors_) {
    if (frozen.count(t.name)) continue;
    out.add(t.name, t.shape);
    out.tensors_.back().decay = t.decay;
    out.tensors_.back().source_offset = t.source_offset;
  }
  return out;
}

const ParamTensor* ParamLayout::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::set<std::string> ParamLayout::names() const {
  std::set<std::string> out;
  for (const auto& t : tensors_) out.insert(t.name);
  return out;
}

const ParamTensor& ParamLayout::get(const std::string& name) const {
  const auto* t = find(name);
  if (!t) fail("model has no parameter '{}'", name);
  return *t;
}

template <typename T>
ModelWeights<T> ModelWeights<T>::bind(const ParamLayout& layout, const LlamaConfig& c, T* base,
                                      bool allow_missing) {
  auto at = [&](const std::string& name) -> T* {
    if (allow_missing && !layout.find(name)) return nullptr;
    return base + layout.get(name).offset;
  };
  ModelWeights w;
  w.token_embd = c.donor_dim > 0 ? nullptr : at("token_embd.weight");
  w.lens = c.donor_dim > 0 ? at("lens.proj.weight") : nullptr;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    auto n = [&](const char* what) { return at(fmt::format("blk.{}.{}.weight", l, what)); };
    LayerWeights<T> lw{n("attn_norm"), n("attn_q"), n("attn_k"), n("attn_v"), n("attn_output"),
                       n("ffn_norm"), n("ffn_gate"), n("ffn_up"), n("ffn_down")};
    for (int t = 0; c.lora.rank > 0 && t < kNumLoraTargets; ++t) {
      const std::string w = fmt::format("blk.{}.{}.weight", l, lora_target_name(LoraTarget(t)));
      if (!layout.find(w + ".lora_a")) continue;  // not a target
      lw.lora_a[size_t(t)] = at(w + ".lora_a");
      lw.lora_b[size_t(t)] = at(w + ".lora_b");
    }
    w.layers.push_back(lw);
  }
  w.output_norm = at("output_norm.weight");
  w.output = c.tied ? w.token_embd : at("output.weight");
  return w;
}

template struct ModelWeights<float>;
template struct ModelWeights<double>;

}  // namespace ggtrain::model
