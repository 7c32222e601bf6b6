#include "model/params.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/block_recipe.h"
#include "util/error.h"

namespace ggtrain::model {

const char* block_matrix_name(BlockMatrix m) {
  static const char* names[kNumBlockMatrices] = {"attn_q",
                                                 "attn_k",
                                                 "attn_v",
                                                 "attn_output",
                                                 "ffn_gate",
                                                 "ffn_up",
                                                 "ffn_down",
                                                 "shortconv.in_proj",
                                                 "shortconv.out_proj",
                                                 "attn_qkv",
                                                 "attn_gate",
                                                 "ssm_beta",
                                                 "ssm_alpha",
                                                 "ssm_out",
                                                 "ffn_gate_inp",
                                                 "ffn_gate_shexp",
                                                 "ffn_up_shexp",
                                                 "ffn_down_shexp"};
  return names[m];
}

const char* expert_matrix_name(ExpertMatrix m) {
  static const char* names[kNumExpertMatrices] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  return names[m];
}

ExpertMatrix expert_matrix_from_name(std::string_view name) {
  for (int m = 0; m < kNumExpertMatrices; ++m)
    if (name == expert_matrix_name(ExpertMatrix(m))) return ExpertMatrix(m);
  return kNumExpertMatrices;
}

bool is_lora_target(std::string_view name) {
  return block_matrix_from_name(name) != kNumBlockMatrices || expert_matrix_from_name(name) != kNumExpertMatrices;
}

std::string lora_target_names_text() {
  std::string out = block_matrix_names_text();
  for (int m = 0; m < kNumExpertMatrices; ++m) out += std::string(", ") + expert_matrix_name(ExpertMatrix(m));
  return out;
}

std::pair<int64_t, int64_t> expert_matrix_shape(const Config& c, ExpertMatrix m) {
  if (m == kExpDown) return {c.d_model, c.expert_ff()};
  return {c.expert_ff(), c.d_model};
}

std::string ssm_a_name(int64_t l) { return fmt::format("blk.{}.ssm_a", l); }

std::string block_tensor_name(int64_t l, std::string_view what, std::string_view kind) {
  return fmt::format("blk.{}.{}.{}", l, what, kind);
}

int64_t block_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int64_t n = 0;
  size_t i = 4;
  for (; i < name.size() && i < 13 && name[i] >= '0' && name[i] <= '9'; ++i) n = n * 10 + (name[i] - '0');
  return i > 4 && i < name.size() && name[i] == '.' ? n : -1;
}

BlockMatrix block_matrix_from_name(std::string_view name) {
  for (int m = 0; m < kNumBlockMatrices; ++m)
    if (name == block_matrix_name(BlockMatrix(m))) return BlockMatrix(m);
  return kNumBlockMatrices;
}

std::string block_matrix_names_text() {
  std::string out;
  for (int m = 0; m < kNumBlockMatrices; ++m) out += std::string(m ? ", " : "") + block_matrix_name(BlockMatrix(m));
  return out;
}

std::pair<int64_t, int64_t> block_matrix_shape(const Config& c, BlockMatrix m) {
  const int64_t C = c.d_model;
  switch (m) {
    case kAttnQ: return {c.q_proj_dim(), C};
    case kAttnK:
    case kAttnV: return {c.kv_dim(), C};
    case kAttnOutput: return {C, c.q_dim()};
    case kFfnGate:
    case kFfnUp: return {c.d_ff, C};
    case kFfnDown: return {C, c.d_ff};
    case kConvInProj: return {3 * C, C};
    case kConvOutProj: return {C, C};
    case kGdnQkv: return {c.ssm_conv_dim(), C};
    case kGdnGate: return {c.ssm_value_dim(), C};
    case kSsmBeta:
    case kSsmAlpha: return {c.ssm_time_step_rank, C};
    case kSsmOut: return {C, c.ssm_value_dim()};
    case kFfnGateInp: return {c.n_experts, C};
    case kFfnGateShexp:
    case kFfnUpShexp: return {c.shared_ff(), C};
    case kFfnDownShexp: return {C, c.shared_ff()};
    case kNumBlockMatrices: break;
  }
  fail("model: block matrix {} does not exist", int(m));
}

bool layer_has_matrix(const Config& c, int64_t l, BlockMatrix m) {
  switch (m) {
    case kAttnQ:
    case kAttnK:
    case kAttnV:
    case kAttnOutput: return c.mixer(l) == Config::Mixer::kAttention;
    case kConvInProj:
    case kConvOutProj: return c.mixer(l) == Config::Mixer::kShortConv;
    case kGdnQkv:
    case kGdnGate:
    case kSsmBeta:
    case kSsmAlpha:
    case kSsmOut: return c.mixer(l) == Config::Mixer::kGatedDeltaNet;
    case kFfnGate:
    case kFfnUp:
    case kFfnDown: return !c.has_experts();
    case kFfnGateInp: return c.has_experts();
    case kFfnGateShexp:
    case kFfnUpShexp:
    case kFfnDownShexp: return c.has_shared_expert();
    default: return true;
  }
}

std::vector<BlockMatrix> model_block_matrices(const Config& c) {
  std::vector<BlockMatrix> out;
  for (int t = 0; t < kNumBlockMatrices; ++t)
    for (int64_t l = 0; l < c.n_layers; ++l)
      if (layer_has_matrix(c, l, BlockMatrix(t))) {
        out.push_back(BlockMatrix(t));
        break;
      }
  return out;
}

ParamLayout::ParamLayout(const Config& c, const std::set<std::string>& held_elsewhere) {
  const int64_t C = c.d_model;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    if (!held_elsewhere.count(name)) this->add(name, std::move(shape));
  };
  if (c.donor_dim > 0) add("lens.proj.weight", {C, c.donor_dim});
  else add("token_embd.weight", {c.vocab, C});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    auto n = [&](const char* what) { return block_tensor_name(l, what); };
    auto matrix = [&](BlockMatrix m) {
      const auto [out, in] = block_matrix_shape(c, m);
      add(n(block_matrix_name(m)), {out, in});
    };
    const BlockRecipe recipe = block_recipe(c, l);
    const char* ffn_norm = recipe.feed_forward().norm;
    // the dense one, or the router, the experts (and the shared expert)
    auto feed_forward = [&] {
      if (!c.has_experts()) {
        for (BlockMatrix m : {kFfnGate, kFfnUp, kFfnDown}) matrix(m);
        return;
      }
      matrix(kFfnGateInp);
      for (int e = 0; e < kNumExpertMatrices; ++e) {
        const auto [out, in] = expert_matrix_shape(c, ExpertMatrix(e));
        add(n(expert_matrix_name(ExpertMatrix(e))), {c.n_experts, out, in});
      }
      if (!c.has_shared_expert()) return;
      add(n(kSharedExpertGate), {C});
      for (BlockMatrix m : {kFfnGateShexp, kFfnUpShexp, kFfnDownShexp}) matrix(m);
    };
    add(n(recipe.mixer().norm), {C});
    if (recipe.mixer().sublayer == Sublayer::kShortConv) {
      add(n(kShortConvKernel), {C, c.shortconv_l_cache});
      for (BlockMatrix m : {kConvInProj, kConvOutProj}) matrix(m);
      add(n(ffn_norm), {C});
      feed_forward();
      continue;  // the families with recurrent layers have no post-norms or biases
    }
    if (recipe.mixer().sublayer == Sublayer::kGatedDeltaNet) {  // in the converter's order
      add(n(ffn_norm), {C});
      feed_forward();
      for (BlockMatrix m : {kGdnQkv, kGdnGate}) matrix(m);
      add(n("ssm_conv1d"), {c.ssm_conv_dim(), c.ssm_conv_kernel});
      add(block_tensor_name(l, "ssm_dt", "bias"), {c.ssm_time_step_rank});
      add(ssm_a_name(l), {c.ssm_time_step_rank});
      for (BlockMatrix m : {kSsmBeta, kSsmAlpha}) matrix(m);
      add(n("ssm_norm"), {c.ssm_state_size});
      matrix(kSsmOut);
      continue;
    }
    for (BlockMatrix m : {kAttnQ, kAttnK, kAttnV, kAttnOutput}) matrix(m);
    if (c.architecture().qkv_bias) {
      add(block_tensor_name(l, "attn_q", "bias"), {c.q_dim()});
      add(block_tensor_name(l, "attn_k", "bias"), {c.kv_dim()});
      add(block_tensor_name(l, "attn_v", "bias"), {c.kv_dim()});
    }
    if (c.architecture().qk_norm) {
      add(n("attn_q_norm"), {c.q_norm_dim()});
      add(n("attn_k_norm"), {c.k_norm_dim()});
    }
    if (recipe.mixer().post_norm) add(n(recipe.mixer().post_norm), {C});
    add(n(ffn_norm), {C});
    feed_forward();
    if (recipe.feed_forward().post_norm) add(n(recipe.feed_forward().post_norm), {C});
  }
  add(c.architecture().output_norm, {C});
  if (!c.tied) add("output.weight", {c.vocab, C});
  if (c.nextn_tensors)
    for (const auto& t : *c.nextn_tensors) carried_.insert(t.name);
  // LoRA tensors come last, so the base tensors keep the offsets of the
  // plain model's layout (a base GGUF loads into the same places).
  const std::vector<BlockMatrix> present = model_block_matrices(c);
  for (const auto& target : c.lora.targets) {
    if (!is_lora_target(target)) fail("model: '{}' is not a LoRA target ({})", target, lora_target_names_text());
    const BlockMatrix m = block_matrix_from_name(target);
    const bool in_model =
        m == kNumBlockMatrices ? c.has_experts() : std::find(present.begin(), present.end(), m) != present.end();
    if (c.lora.rank > 0 && !in_model) {
      std::string names;
      for (BlockMatrix p : present) names += std::string(names.empty() ? "" : ", ") + block_matrix_name(p);
      for (int e = 0; c.has_experts() && e < kNumExpertMatrices; ++e)
        names += std::string(", ") + expert_matrix_name(ExpertMatrix(e));
      fail("model: LoRA target '{}' is in no layer of this {} model; its block matrices are {}", target, c.arch, names);
    }
  }
  for (int64_t l = 0; c.lora.rank > 0 && l < c.n_layers; ++l)
    for (const auto& target : c.lora.targets) {
      const std::string w = block_tensor_name(l, target);
      const ExpertMatrix e = expert_matrix_from_name(target);
      if (e != kNumExpertMatrices) {  // one adapter per expert, stacked as the experts are
        const auto [out, in] = expert_matrix_shape(c, e);
        add(w + ".lora_a", {c.n_experts, c.lora.rank, in});
        add(w + ".lora_b", {c.n_experts, out, c.lora.rank});
        continue;
      }
      const BlockMatrix m = block_matrix_from_name(target);
      if (!layer_has_matrix(c, l, m)) continue;
      const auto [out, in] = block_matrix_shape(c, m);
      add(w + ".lora_a", {c.lora.rank, in});
      add(w + ".lora_b", {out, c.lora.rank});
    }
}

void ParamLayout::add(const std::string& name, std::vector<int64_t> shape) {
  ParamTensor t;
  t.name = name;
  t.size = 1;
  for (auto d : shape) t.size *= d;
  t.decay = shape.size() >= 2;  // matrices, and the experts' stacks of them
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
ModelWeights<T> ModelWeights<T>::bind(const ParamLayout& layout, const Config& c, T* base, bool allow_missing) {
  auto at = [&](const std::string& name) -> T* {
    if (allow_missing && !layout.find(name)) return nullptr;
    return base + layout.get(name).offset;
  };
  ModelWeights w;
  w.token_embd = c.donor_dim > 0 ? nullptr : at("token_embd.weight");
  w.lens = c.donor_dim > 0 ? at("lens.proj.weight") : nullptr;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    auto n = [&](const char* what) { return at(block_tensor_name(l, what)); };
    LayerWeights<T> lw;
    const BlockRecipe recipe = block_recipe(c, l);
    for (int h = 0; h < 2; ++h) {
      lw.norm[size_t(h)] = n(recipe.halves[size_t(h)].norm);
      if (recipe.halves[size_t(h)].post_norm) lw.post_norm[size_t(h)] = n(recipe.halves[size_t(h)].post_norm);
    }
    const Sublayer mixer = recipe.mixer().sublayer;
    if (mixer == Sublayer::kGatedDeltaNet) {
      lw.ssm_conv = n("ssm_conv1d");
      lw.ssm_dt = at(block_tensor_name(l, "ssm_dt", "bias"));
      lw.ssm_a = at(ssm_a_name(l));
      lw.ssm_norm = n("ssm_norm");
    }
    const bool conv = mixer != Sublayer::kAttention;  // no attention tensors
    if (mixer == Sublayer::kShortConv) lw.conv_kernel = n(kShortConvKernel);
    if (!conv && c.architecture().qkv_bias) {
      lw.bq = at(block_tensor_name(l, "attn_q", "bias"));
      lw.bk = at(block_tensor_name(l, "attn_k", "bias"));
      lw.bv = at(block_tensor_name(l, "attn_v", "bias"));
    }
    if (!conv && c.architecture().qk_norm) {
      lw.attn_q_norm = n("attn_q_norm");
      lw.attn_k_norm = n("attn_k_norm");
    }
    for (int e = 0; c.has_experts() && e < kNumExpertMatrices; ++e)
      lw.experts[size_t(e)] = n(expert_matrix_name(ExpertMatrix(e)));
    if (c.has_shared_expert()) lw.shared_expert_gate = n(kSharedExpertGate);
    for (int e = 0; c.lora.rank > 0 && c.has_experts() && e < kNumExpertMatrices; ++e) {
      const std::string w = block_tensor_name(l, expert_matrix_name(ExpertMatrix(e)));
      if (!layout.find(w + ".lora_a")) continue;  // not a target
      lw.expert_lora_a[size_t(e)] = at(w + ".lora_a");
      lw.expert_lora_b[size_t(e)] = at(w + ".lora_b");
    }
    for (int t = 0; c.lora.rank > 0 && t < kNumBlockMatrices; ++t) {
      const std::string w = block_tensor_name(l, block_matrix_name(BlockMatrix(t)));
      if (!layout.find(w + ".lora_a")) continue;  // not a target
      lw.lora_a[size_t(t)] = at(w + ".lora_a");
      lw.lora_b[size_t(t)] = at(w + ".lora_b");
    }
    w.layers.push_back(lw);
  }
  w.output_norm = at(c.architecture().output_norm);
  w.output = c.tied ? w.token_embd : at("output.weight");
  return w;
}

template struct ModelWeights<float>;
template struct ModelWeights<double>;

}  // namespace ggtrain::model
