#include "model/metadata_keys.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"

namespace ggtrain::model {

namespace {

using gguf::Value;
using Written = std::optional<Value>;
using Pass = MetadataKey::Pass;

Written u32(int64_t v) { return Value::u32(uint32_t(v)); }
Written f32(double v) { return Value::f32(float(v)); }

bool short_conv(const Config& c) { return c.architecture().recurrent_mixer == Mixer::kShortConv; }
bool gated_deltanet(const Config& c) { return c.architecture().recurrent_mixer == Mixer::kGatedDeltaNet; }
bool experts(const Config& c) { return c.has_experts(); }
bool windowed(const Config& c) { return c.architecture().default_swa_pattern != 0; }  // llama.cpp reads a window

template <int64_t Config::*Field>
void read_count(const gguf::GgufFile& f, const std::string& key, Config& c) {
  c.*Field = int64_t(f.get_uint(key));
}

// head_count_kv: one count, or (families with convolution layers) one per
// layer, 0 marking a convolution layer; the attention layers must agree.
Written kv_heads(const Config& c) {
  if (!short_conv(c)) return u32(c.n_kv_heads);
  std::vector<int32_t> per_layer;  // LFM2: 0 on convolution layers, as its converter writes it
  for (int64_t n : c.kv_heads_per_layer()) per_layer.push_back(int32_t(n));
  return Value::i32_array(per_layer);
}

void read_kv_heads(const gguf::GgufFile& f, const std::string& k, Config& c) {
  const gguf::Value* v = f.find(k);
  if (!v || v->type != gguf::ValueType::ARRAY) {
    c.n_kv_heads = int64_t(f.get_uint_or(k, uint64_t(c.n_heads)));
    return;
  }
  if (!short_conv(c)) fail("{}: {} is a per-layer list; {} needs one count for every layer", f.path(), k, c.arch);
  if (int64_t(v->items.size()) != c.n_layers || !std::all_of(v->items.begin(), v->items.end(), [](const auto& i) {
        return i.is_integer() && i.as_double() >= 0;
      }))
    fail("{}: {} must list a count >= 0 for each of the {} layers", f.path(), k, c.n_layers);
  c.n_kv_heads = 0;
  for (size_t l = 0; l < v->items.size(); ++l) {
    const auto n = int64_t(v->items[l].as_double());
    if (n == 0) continue;
    if (c.n_kv_heads != 0 && n != c.n_kv_heads)
      fail("{}: {} gives layer {} {} heads but an earlier layer {}; ggtrain needs one count", f.path(), k, l, n,
           c.n_kv_heads);
    c.n_kv_heads = n;
    c.attention_layers += (c.attention_layers.empty() ? "" : ",") + std::to_string(l);
  }
  if (c.n_kv_heads == 0) fail("{}: {} marks no layer as attention; ggtrain needs at least one", f.path(), k);
  if (!c.has_recurrent_layers()) c.attention_layers.clear();  // every layer attends
}

// key_length and value_length: heads of another size than d_model /
// n_heads (Qwen3) become head_dim; the families whose converter writes them
// always have them.
Written head_size(const Config& c) {
  return c.architecture().writes_head_size || c.head_dim > 0 ? u32(c.d_head()) : std::nullopt;
}

void read_head_size(const gguf::GgufFile& f, const std::string& key, Config& c) {
  if (!f.find(key)) return;
  const int64_t k = int64_t(f.get_uint(key));
  const std::string value_key = c.key("attention.value_length");
  const int64_t v = int64_t(f.get_uint_or(value_key, uint64_t(k)));
  if (v != k)
    fail("{}: {} is {} but {} is {}; value heads of another size than key heads are not supported", f.path(), value_key,
         v, key, k);
  if (c.n_heads <= 0 || k * c.n_heads != c.d_model) c.head_dim = k;
}

// The converter counts the multi-token-prediction blocks in block_count;
// n_layers is the blocks the model runs (llama.cpp's n_layer()).
void read_nextn_layers(const gguf::GgufFile& f, const std::string& key, Config& c) {
  const uint64_t n = f.get_uint_or(key, 0);
  if (n >= uint64_t(c.n_layers))
    fail("{}: {} is {} but block_count is {}; the prediction blocks follow at least one block the model runs", f.path(),
         key, n, c.n_layers);
  c.n_nextn = int64_t(n);
  c.n_layers -= c.n_nextn;
}

void read_value_width(const gguf::GgufFile& f, const std::string& key, Config& c) {
  const uint64_t inner = f.get_uint(key);
  if (inner != uint64_t(c.ssm_time_step_rank * c.ssm_state_size))
    fail("{}: {} is {}, expected ssm.time_step_rank x ssm.state_size = {}", f.path(), key, inner,
         c.ssm_time_step_rank * c.ssm_state_size);
}

// Qwen3.5's attention layers: every full_attention_interval-th layer when
// they are regular (0 otherwise), else attention.recurrent_layers, one bool
// per layer, as the converter writes the model's layer_types.
int64_t attention_interval(const Config& c) {
  int64_t interval = 0;
  while (interval < c.n_layers && c.is_recurrent_layer(interval)) ++interval;
  ++interval;  // the first attention layer is interval - 1
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (c.is_recurrent_layer(l) != ((l + 1) % interval != 0)) return 0;
  return interval;
}

Written recurrent_layer_list(const Config& c) {
  if (attention_interval(c) > 0) return std::nullopt;
  std::vector<Value> recurrent;
  for (int64_t l = 0; l < c.n_layers; ++l) recurrent.push_back(Value::boolean(c.is_recurrent_layer(l)));
  // the prediction blocks attend, as the converter lists them
  for (int64_t l = 0; l < c.n_nextn; ++l) recurrent.push_back(Value::boolean(false));
  return Value::array(gguf::ValueType::BOOL, recurrent);
}

// As llama.cpp's loader decides: the list when present, else the interval
// (default 4).
void read_layer_kinds(const gguf::GgufFile& f, const std::string& interval_key, Config& c) {
  std::vector<bool> recurrent(size_t(c.n_layers));
  const std::string list_key = c.key("attention.recurrent_layers");
  if (const gguf::Value* v = f.find(list_key)) {
    if (v->type != gguf::ValueType::ARRAY || int64_t(v->items.size()) < c.n_layers ||
        v->elem_type != gguf::ValueType::BOOL)
      fail("{}: {} must be a list of {} booleans, one per layer", f.path(), list_key, c.n_layers);
    for (int64_t l = 0; l < c.n_layers; ++l) recurrent[size_t(l)] = v->items[size_t(l)].u != 0;
  } else {
    const uint64_t interval = f.get_uint_or(interval_key, 4);
    if (interval == 0) fail("{}: {} is 0; it must be at least 1", f.path(), interval_key);
    for (int64_t l = 0; l < c.n_layers; ++l) recurrent[size_t(l)] = uint64_t(l + 1) % interval != 0;
  }
  c.attention_layers.clear();
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (!recurrent[size_t(l)]) c.attention_layers += (c.attention_layers.empty() ? "" : ",") + std::to_string(l);
  if (c.attention_layers.empty())
    fail("{}: no layer attends ({}); ggtrain needs at least one attention layer", f.path(),
         f.find(list_key) ? list_key : interval_key);
  if (!c.has_recurrent_layers()) c.attention_layers.clear();
}

// The multimodal RoPE's sections (time, height, width, extra) in pairs:
// text rotates every pair by its position whatever the split, so these only
// need to cover n_rot/2 as Qwen3.5's [11, 11, 10, 0] covers 32.
Written rope_sections(const Config& c) {
  const int32_t pairs = int32_t(c.n_rot() / 2), width = pairs / 3, height = (pairs - width) / 2;
  return Value::i32_array({pairs - height - width, height, width, 0});
}

// The experts' counts, and their width where the family has a key for it
// (llama.cpp's qwen3moe falls back to feed_forward_length / expert_used_count).
void read_experts(const gguf::GgufFile& f, const std::string& count_key, Config& c) {
  c.n_experts = int64_t(f.get_uint(count_key));
  const std::string used_key = c.key("expert_used_count");
  if (const gguf::Value* v = f.find(used_key); v && !v->is_integer())
    fail("{}: {} is not one integer; per-layer expert counts are not supported", f.path(), used_key);
  c.n_experts_used = int64_t(f.get_uint(used_key));
  if (c.n_experts_used < 1 || c.n_experts_used > c.n_experts)
    fail("{}: {} is {}; it must be in [1, {} ({})]", f.path(), used_key, c.n_experts_used, count_key, c.n_experts);
  if (!c.architecture().expert_width_key) return;
  const std::string width_key = c.key("expert_feed_forward_length");
  if (const gguf::Value* v = f.find(width_key); v && !v->is_integer())
    fail("{}: {} is not one integer; per-layer expert widths are not supported", f.path(), width_key);
  c.d_ff_expert = int64_t(f.get_uint_or(width_key, uint64_t(c.d_ff / c.n_experts_used)));
  if (c.has_shared_expert()) c.d_ff_shared = int64_t(f.get_uint_or(c.key("expert_shared_feed_forward_length"), 0));
}

// After the shape is validated (the head size exists): a partial rotation
// where the family allows one.
void read_rope_dimensions(const gguf::GgufFile& f, const std::string& key, Config& c) {
  const auto* rd = f.find(key);
  if (!rd || !rd->is_integer()) return;
  const auto n_rot = int64_t(rd->as_double());
  if (n_rot != c.d_head() && !c.architecture().partial_rope)
    fail("{}: {} {} differs from the head size {}; {} rotates whole heads", f.path(), key, n_rot, c.d_head(), c.arch);
  if (n_rot != c.d_head()) c.rope_dim = n_rot;
  c.validate(f.path());
}

void read_eps(const gguf::GgufFile& f, const std::string& key, Config& c) { c.rms_eps = f.get_float(key); }

void read_rope_base(const gguf::GgufFile& f, const std::string& key, Config& c) {
  c.rope_freq_base = f.get_float_or(key, 10000.0);
}

// llama.cpp's reading: type "linear" unless named, the factor from
// rope.scaling.factor or the older rope.scale_linear.
void read_rope_scaling(const gguf::GgufFile& f, const std::string& type_key, Config& c) {
  if (f.find(type_key)) {
    const std::string type = f.get_string(type_key);
    if (type != "linear" && type != "none")
      fail("{}: {} is '{}'; only linear RoPE scaling (or none) is supported", f.path(), type_key, type);
  }
  double factor = f.get_float_or(c.key("rope.scaling.factor"), f.get_float_or(c.key("rope.scale_linear"), 0.0));
  c.rope_scaling_factor = factor == 0 ? 1.0 : factor;
}

// Written as the converter writes a "linear" rope_scaling.
Written scaled(const Config& c, Written v) { return c.rope_scaling_factor != 1.0 ? v : std::nullopt; }

void read_sliding_window(const gguf::GgufFile& f, const std::string& key, Config& c) {
  c.sliding_window = int64_t(f.get_uint_or(key, 0));
  const std::string pattern_key = c.key("attention.sliding_window_pattern");
  if (const gguf::Value* p = f.find(pattern_key); p && !p->is_integer())
    fail("{}: {} is not an integer; per-layer sliding-window lists are not supported", f.path(), pattern_key);
  c.swa_pattern = int64_t(f.get_uint_or(pattern_key, uint64_t(c.architecture().default_swa_pattern)));
  c.rope_freq_base_swa = f.get_float_or(c.key("rope.freq_base_swa"), kDefaultRopeBaseSwa);
}

// The window's pattern and base only where llama.cpp would not assume them:
// the converter writes neither.
Written window(const Config& c, bool differs, Written v) { return c.sliding_window > 0 && differs ? v : std::nullopt; }

void refuse_softcapping(const gguf::GgufFile& f, const std::string& key, Config&) {
  if (const gguf::Value* cap = f.find(key); cap && cap->as_double() != 0)
    fail("{}: {} is {}; soft-capped logits are not supported", f.path(), key, cap->as_double());
}

}  // namespace

const std::vector<MetadataKey>& metadata_keys() {
  using C = Config;
  static const std::vector<MetadataKey> keys = {
      // The vocabulary is token_embd's rows; this is written for llama.cpp.
      {"vocab_size", nullptr, [](const C& c) { return u32(c.vocab); }, nullptr},
      {"context_length", nullptr, [](const C& c) { return u32(c.ctx); }, read_count<&C::ctx>},
      {"embedding_length", nullptr, [](const C& c) { return u32(c.d_model); }, read_count<&C::d_model>},
      {"block_count", nullptr, [](const C& c) { return u32(c.n_layers + c.n_nextn); }, read_count<&C::n_layers>},
      {"feed_forward_length", nullptr, [](const C& c) { return u32(c.d_ff); }, read_count<&C::d_ff>},
      {"attention.head_count", nullptr, [](const C& c) { return u32(c.n_heads); }, read_count<&C::n_heads>},
      {"attention.head_count_kv", nullptr, kv_heads, read_kv_heads},
      // llama.cpp's LFM2 loader requires the width, whatever the layers.
      {"shortconv.l_cache", short_conv, [](const C& c) { return u32(c.shortconv_l_cache); },
       read_count<&C::shortconv_l_cache>},
      {"attention.key_length", nullptr, head_size, read_head_size},
      {"attention.value_length", nullptr, head_size, nullptr},
      {"nextn_predict_layers", gated_deltanet, [](const C& c) { return c.n_nextn > 0 ? u32(c.n_nextn) : std::nullopt; },
       read_nextn_layers},
      {"ssm.conv_kernel", gated_deltanet, [](const C& c) { return u32(c.ssm_conv_kernel); },
       read_count<&C::ssm_conv_kernel>},
      {"ssm.state_size", gated_deltanet, [](const C& c) { return u32(c.ssm_state_size); },
       read_count<&C::ssm_state_size>},
      {"ssm.group_count", gated_deltanet, [](const C& c) { return u32(c.ssm_group_count); },
       read_count<&C::ssm_group_count>},
      {"ssm.time_step_rank", gated_deltanet, [](const C& c) { return u32(c.ssm_time_step_rank); },
       read_count<&C::ssm_time_step_rank>},
      {"ssm.inner_size", gated_deltanet, [](const C& c) { return u32(c.ssm_value_dim()); }, read_value_width},
      {"full_attention_interval", gated_deltanet,
       [](const C& c) {
         const int64_t interval = attention_interval(c);
         return interval > 0 ? u32(interval) : std::nullopt;
       },
       read_layer_kinds},
      {"attention.recurrent_layers", gated_deltanet, recurrent_layer_list, nullptr},
      {"rope.dimension_sections", gated_deltanet, rope_sections, nullptr},  // llama.cpp's; ggtrain needs none
      {"expert_count", experts, [](const C& c) { return u32(c.n_experts); }, read_experts},
      {"expert_used_count", experts, [](const C& c) { return u32(c.n_experts_used); }, nullptr},
      {"expert_feed_forward_length", experts,
       [](const C& c) { return c.architecture().expert_width_key ? u32(c.expert_ff()) : std::nullopt; }, nullptr},
      {"expert_shared_feed_forward_length", experts,
       [](const C& c) { return c.has_shared_expert() ? u32(c.shared_ff()) : std::nullopt; }, nullptr},
      {"rope.dimension_count", nullptr, [](const C& c) { return u32(c.n_rot()); }, read_rope_dimensions,
       Pass::kAfterShape},
      {"rope.freq_base", nullptr, [](const C& c) { return f32(c.rope_freq_base); }, read_rope_base},
      {"attention.layer_norm_rms_epsilon", nullptr, [](const C& c) { return f32(c.rms_eps); }, read_eps},
      {"rope.scaling.type", nullptr, [](const C& c) { return scaled(c, Value::str("linear")); }, read_rope_scaling},
      {"rope.scaling.factor", nullptr, [](const C& c) { return scaled(c, f32(c.rope_scaling_factor)); }, nullptr},
      {"rope.scale_linear", nullptr, nullptr, nullptr},  // older files' factor, read with rope.scaling.type
      {"attention.sliding_window", windowed, [](const C& c) { return window(c, true, u32(c.sliding_window)); },
       read_sliding_window},
      {"attention.sliding_window_pattern", windowed,
       [](const C& c) { return window(c, c.swa_pattern != c.architecture().default_swa_pattern, u32(c.swa_pattern)); },
       nullptr},
      {"rope.freq_base_swa", windowed,
       [](const C& c) { return window(c, c.rope_freq_base_swa != kDefaultRopeBaseSwa, f32(c.rope_freq_base_swa)); },
       nullptr},
      {"final_logit_softcapping", nullptr, nullptr, refuse_softcapping},
  };
  return keys;
}

void add_metadata_keys(gguf::GgufWriter& w, const Config& c) {
  for (const MetadataKey& k : metadata_keys()) {
    if (!k.write || (k.in_family && !k.in_family(c))) continue;
    if (Written v = k.write(c)) w.set(c.key(k.name), std::move(*v));
  }
}

void read_metadata_keys(const gguf::GgufFile& f, Config& c, MetadataKey::Pass pass) {
  for (const MetadataKey& k : metadata_keys())
    if (k.read && k.pass == pass && (!k.in_family || k.in_family(c))) k.read(f, c.key(k.name), c);
}

}  // namespace ggtrain::model
