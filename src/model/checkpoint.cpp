#include "model/checkpoint.h"

#include <algorithm>

#include "quant/gguf_floats.h"
#include "util/error.h"

namespace ggtrain::model {

using gguf::TensorType;
using gguf::Value;

std::vector<uint64_t> ggml_ne(const std::vector<int64_t>& shape) {
  std::vector<uint64_t> ne(shape.rbegin(), shape.rend());
  return ne;
}

namespace {
// The attention layers as full_attention_interval when they are every k-th
// layer, else as attention.recurrent_layers (the converter's layer_types list).
void add_layer_kinds(gguf::GgufWriter& w, const Config& c) {
  int64_t interval = 0;
  while (interval < c.n_layers && c.is_recurrent_layer(interval)) ++interval;
  ++interval;  // the first attention layer is interval - 1
  bool regular = true;
  for (int64_t l = 0; l < c.n_layers; ++l) regular = regular && c.is_recurrent_layer(l) == ((l + 1) % interval != 0);
  if (regular) {
    w.set(c.key("full_attention_interval"), Value::u32(uint32_t(interval)));
    return;
  }
  std::vector<Value> recurrent;
  for (int64_t l = 0; l < c.n_layers; ++l) recurrent.push_back(Value::boolean(c.is_recurrent_layer(l)));
  w.set(c.key("attention.recurrent_layers"), Value::array(gguf::ValueType::BOOL, recurrent));
}

// Qwen3.5's keys, as its converter writes them.
void add_gated_deltanet_keys(gguf::GgufWriter& w, const Config& c) {
  auto u32 = [](int64_t v) { return Value::u32(uint32_t(v)); };
  w.set(c.key("ssm.conv_kernel"), u32(c.ssm_conv_kernel));
  w.set(c.key("ssm.state_size"), u32(c.ssm_state_size));
  w.set(c.key("ssm.group_count"), u32(c.ssm_group_count));
  w.set(c.key("ssm.time_step_rank"), u32(c.ssm_time_step_rank));
  w.set(c.key("ssm.inner_size"), u32(c.ssm_value_dim()));
  add_layer_kinds(w, c);
  // The multimodal RoPE's sections (time, height, width, extra) in pairs:
  // text rotates every pair by its position whatever the split, so these
  // only need to cover n_rot/2 as Qwen3.5's [11, 11, 10, 0] covers 32.
  const int32_t pairs = int32_t(c.n_rot() / 2), width = pairs / 3, height = (pairs - width) / 2;
  w.set(c.key("rope.dimension_sections"), Value::i32_array({pairs - height - width, height, width, 0}));
}
}  // namespace

void add_model_tensors(gguf::GgufWriter& w, const Config& c, const ParamLayout& layout, const float* params,
                       TensorType type) {
  auto u32 = [](int64_t v) { return Value::u32(uint32_t(v)); };
  w.set("general.architecture", Value::str(c.arch));
  w.set(c.key("vocab_size"), u32(c.vocab));
  w.set(c.key("context_length"), u32(c.ctx));
  w.set(c.key("embedding_length"), u32(c.d_model));
  w.set(c.key("block_count"), u32(c.n_layers));
  w.set(c.key("feed_forward_length"), u32(c.d_ff));
  w.set(c.key("attention.head_count"), u32(c.n_heads));
  // LFM2: per layer, 0 on convolution layers, as its converter writes it.
  if (c.architecture().recurrent_mixer == Mixer::kShortConv) {
    std::vector<int32_t> per_layer;
    for (int64_t n : c.kv_heads_per_layer()) per_layer.push_back(int32_t(n));
    w.set(c.key("attention.head_count_kv"), Value::i32_array(per_layer));
    w.set(c.key("shortconv.l_cache"), u32(c.shortconv_l_cache));
  } else {
    w.set(c.key("attention.head_count_kv"), u32(c.n_kv_heads));
  }
  if (c.architecture().writes_head_size || c.head_dim > 0) {
    w.set(c.key("attention.key_length"), u32(c.d_head()));
    w.set(c.key("attention.value_length"), u32(c.d_head()));
  }
  if (c.architecture().recurrent_mixer == Mixer::kGatedDeltaNet) add_gated_deltanet_keys(w, c);
  if (c.has_experts()) {
    w.set(c.key("expert_count"), u32(c.n_experts));
    w.set(c.key("expert_used_count"), u32(c.n_experts_used));
    if (c.architecture().expert_width_key) w.set(c.key("expert_feed_forward_length"), u32(c.expert_ff()));
    if (c.has_shared_expert()) w.set(c.key("expert_shared_feed_forward_length"), u32(c.shared_ff()));
  }
  w.set(c.key("rope.dimension_count"), u32(c.n_rot()));
  w.set(c.key("rope.freq_base"), Value::f32(float(c.rope_freq_base)));
  w.set(c.key("attention.layer_norm_rms_epsilon"), Value::f32(float(c.rms_eps)));
  if (c.rope_scaling_factor != 1.0) {  // as the converter writes a "linear" rope_scaling
    w.set(c.key("rope.scaling.type"), Value::str("linear"));
    w.set(c.key("rope.scaling.factor"), Value::f32(float(c.rope_scaling_factor)));
  }
  if (c.sliding_window > 0) {
    w.set(c.key("attention.sliding_window"), u32(c.sliding_window));
    // Only what llama.cpp would not assume: the converter writes neither.
    if (c.swa_pattern != c.architecture().default_swa_pattern)
      w.set(c.key("attention.sliding_window_pattern"), u32(c.swa_pattern));
    if (c.rope_freq_base_swa != kDefaultRopeBaseSwa)
      w.set(c.key("rope.freq_base_swa"), Value::f32(float(c.rope_freq_base_swa)));
  }
  // llama_ftype: 0 = all F32, 1 = mostly F16, 7 = mostly Q8_0, 32 = mostly BF16
  uint32_t ftype = type == TensorType::F16 ? 1 : type == TensorType::Q8_0 ? 7 : type == TensorType::BF16 ? 32 : 0;
  w.set("general.file_type", Value::u32(ftype));
  // First, where llama.cpp's converter puts it (an extra tensor, before the model's).
  if (!c.rope_freq_factors.empty())
    quant::add_float_tensor(w, kRopeFreqsTensor, TensorType::F32, {uint64_t(c.rope_freq_factors.size())},
                            c.rope_freq_factors.data());
  for (const auto& t : layout.tensors()) {
    // Vectors, LFM2's and Qwen3.5's convolution kernels and the experts'
    // routers stay F32 as the converter writes them.
    const bool f32_matrix = t.name.ends_with(std::string(kShortConvKernel) + ".weight") ||
                            t.name.ends_with(".ssm_conv1d.weight") || t.name.ends_with(".ffn_gate_inp.weight");
    TensorType tt = t.shape.size() == 1 || f32_matrix ? TensorType::F32 : type;
    if (tt == TensorType::Q8_0 && t.shape.back() % 32 != 0) tt = TensorType::F16;
    quant::add_float_tensor(w, t.name, tt, ggml_ne(t.shape), params + t.offset);
  }
}

const gguf::TensorInfo& tensor_of_shape(const gguf::GgufFile& f, const ParamTensor& t) {
  const auto& ti = f.tensor(t.name);
  if (ti.shape() != ggml_ne(t.shape))
    fail("{}: tensor '{}' has ne [{}], expected [{}]", f.path(), t.name, fmt::join(ti.shape(), ", "),
         fmt::join(ggml_ne(t.shape), ", "));
  return ti;
}

void load_model_params(const gguf::GgufFile& f, const ParamLayout& layout, float* params,
                       const std::set<std::string>& held_elsewhere) {
  for (const auto& ti : f.tensors())
    if (!layout.find(ti.name) && !held_elsewhere.count(ti.name) && ti.name != kRopeFreqsTensor)
      fail("{}: unexpected tensor '{}' for this llama configuration", f.path(), ti.name);
  for (const auto& t : layout.tensors()) {
    auto v = quant::tensor_floats(f, tensor_of_shape(f, t));
    std::copy(v.begin(), v.end(), params + t.offset);
  }
}

}  // namespace ggtrain::model
