#include "model/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "gguf/reader.h"
#include "kernels/expert_routing.h"
#include "model/metadata_keys.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "util/error.h"

namespace ggtrain::model {

Recompute recompute_from_name(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "attn") return Recompute::kAttn;
  if (name == "all") return Recompute::kAll;
  fail("recompute must be \"none\", \"attn\" or \"all\", got \"{}\"", name);
}

Precision precision_from_name(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  fail("precision must be \"fp32\" or \"bf16\", got \"{}\"", name);
}

const std::vector<ConfigField>& config_fields() {
  using C = Config;
  static const std::vector<ConfigField> fields = {
      {"arch", &C::arch,
       "architecture: llama, qwen2, qwen3, gemma3, smollm3, lfm2, qwen35, qwen35moe, qwen3moe or olmoe (rows of "
       "model/architecture.h)"},
      {"d_model", &C::d_model, "width of the residual stream (embedding size)"},
      {"n_layers", &C::n_layers, "transformer blocks"},
      {"n_heads", &C::n_heads, "attention (query) heads"},
      {"head_dim", &C::head_dim, "size of each attention head; 0: d_model / n_heads"},
      {"n_kv_heads", &C::n_kv_heads, "key/value heads (grouped-query attention); divides n_heads"},
      {"d_ff", &C::d_ff, "hidden width of the gated feed-forward layer"},
      {"ctx", &C::ctx, "longest context the model is built for (GGUF key <arch>.context_length)"},
      {"tied", &C::tied, "the output head shares the token embedding's weights"},
      {"rope_freq_base", &C::rope_freq_base, "RoPE base frequency (GGUF key <arch>.rope.freq_base)"},
      {"rms_eps", &C::rms_eps, "epsilon of the RMS norms (<arch>.attention.layer_norm_rms_epsilon)"},
      {"rope_scaling_factor", &C::rope_scaling_factor,
       "linear RoPE scaling of the global layers: positions divided by it (1: none)"},
      {"sliding_window", &C::sliding_window,
       "gemma3: positions a local layer's attention sees, itself included (0: all layers global)"},
      {"swa_pattern", &C::swa_pattern, "gemma3: every swa_pattern-th layer is global, the others local"},
      {"rope_freq_base_swa", &C::rope_freq_base_swa, "gemma3: RoPE base frequency of the local layers"},
      {"attention_layers", &C::attention_layers,
       "lfm2, qwen35: the layers that attend, as \"2,5,8\"; the others are short convolutions (lfm2) or Gated "
       "DeltaNet (qwen35) (empty: all attend)"},
      {"shortconv_l_cache", &C::shortconv_l_cache, "lfm2: taps of each short convolution (<arch>.shortconv.l_cache)"},
      {"ssm_conv_kernel", &C::ssm_conv_kernel,
       "qwen35: taps of the Gated DeltaNet convolution (<arch>.ssm.conv_kernel)"},
      {"ssm_state_size", &C::ssm_state_size, "qwen35: Gated DeltaNet head size (<arch>.ssm.state_size)"},
      {"ssm_group_count", &C::ssm_group_count, "qwen35: Gated DeltaNet key heads (<arch>.ssm.group_count)"},
      {"ssm_time_step_rank", &C::ssm_time_step_rank,
       "qwen35: Gated DeltaNet value heads, a multiple of the key heads (<arch>.ssm.time_step_rank)"},
      {"n_experts", &C::n_experts, "qwen3moe, qwen35moe, olmoe: experts per layer (<arch>.expert_count)"},
      {"n_experts_used", &C::n_experts_used,
       "qwen3moe, qwen35moe, olmoe: experts each token runs (<arch>.expert_used_count)"},
      {"d_ff_expert", &C::d_ff_expert,
       "qwen3moe, qwen35moe: hidden width of each expert (<arch>.expert_feed_forward_length; 0: d_ff)"},
      {"d_ff_shared", &C::d_ff_shared,
       "qwen35moe: hidden width of the shared expert (<arch>.expert_shared_feed_forward_length; 0: d_ff)"},
      {"rope_dim", &C::rope_dim,
       "qwen35: dimensions of each head RoPE rotates (<arch>.rope.dimension_count; 0: the whole head)"},
  };
  return fields;
}

std::string field_text(const Config& c, const ConfigField& f) {
  return std::visit([&](auto member) { return fmt::format("{}", c.*member); }, f.member);
}

void copy_fields(Config& to, const Config& from) {
  for (const auto& f : config_fields()) std::visit([&](auto member) { to.*member = from.*member; }, f.member);
  copy_file_parts(to, from);
}

void copy_file_parts(Config& to, const Config& from) {
  to.rope_freq_factors = from.rope_freq_factors;
  to.n_nextn = from.n_nextn;
  to.nextn_tensors = from.nextn_tensors;
}

bool same_field(const Config& a, const Config& b, const ConfigField& f, bool as_f32) {
  return std::visit(
      [&](auto member) {
        if constexpr (std::is_same_v<decltype(member), double Config::*>)
          if (as_f32) return float(a.*member) == float(b.*member);
        return a.*member == b.*member;
      },
      f.member);
}

const Architecture& Config::architecture() const {
  const Architecture* a = find_architecture(arch);
  if (!a) fail("model: architecture '{}' is not supported ({})", arch, architecture_names());
  return *a;
}

bool Config::uses_rope(int64_t l) const {
  const int64_t step = architecture().no_rope_layer_step;
  return step == 0 || (l + 1) % step != 0;
}

namespace {
// attention_layers as indices; throws naming the first bad entry.
std::vector<int64_t> parse_layer_list(const std::string& text, int64_t n_layers, const std::string& where) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    char* stop = nullptr;
    const long long v = item.empty() ? -1 : std::strtoll(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || v < 0 || v >= n_layers || (!out.empty() && v <= out.back()))
      fail("{}: attention_layers \"{}\": '{}' is not a layer index above the previous one and below n_layers {}", where,
           text, item, n_layers);
    out.push_back(v);
    at = end + 1;
  }
  return out;
}
}  // namespace

bool Config::is_recurrent_layer(int64_t l) const {
  if (attention_layers.empty()) return false;
  for (int64_t a : parse_layer_list(attention_layers, n_layers, "model config"))
    if (a == l) return false;
  return true;
}

bool Config::has_recurrent_layers() const {
  for (int64_t l = 0; l < n_layers; ++l)
    if (is_recurrent_layer(l)) return true;
  return false;
}

std::vector<int64_t> Config::kv_heads_per_layer() const {
  std::vector<int64_t> out;
  for (int64_t l = 0; l < n_layers; ++l) out.push_back(is_recurrent_layer(l) ? 0 : n_kv_heads);
  return out;
}

void Config::validate(const std::string& where) const {
  if (!find_architecture(arch))
    fail("{}: arch is '{}'; supported architectures: {}", where, arch, architecture_names());
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) fail("{}: {} must be positive, is {}", where, name, v);
  };
  positive(vocab, "vocab");
  positive(d_model, "d_model");
  positive(n_layers, "n_layers");
  positive(n_heads, "n_heads");
  positive(n_kv_heads, "n_kv_heads");
  positive(d_ff, "d_ff");
  positive(ctx, "ctx");
  if (head_dim < 0) fail("{}: head_dim must be >= 0 (0: d_model / n_heads), is {}", where, head_dim);
  if (head_dim == 0 && d_model % n_heads != 0)
    fail("{}: d_model {} is not divisible by n_heads {} (or set head_dim)", where, d_model, n_heads);
  if (d_head() % 2 != 0) fail("{}: head size {} must be even for RoPE", where, d_head());
  if (n_heads % n_kv_heads != 0) fail("{}: n_heads {} is not a multiple of n_kv_heads {}", where, n_heads, n_kv_heads);
  if (!(rope_freq_base > 0)) fail("{}: rope_freq_base must be positive", where);
  if (!(rms_eps > 0)) fail("{}: rms_eps must be positive", where);
  if (!(rope_scaling_factor > 0 && std::isfinite(rope_scaling_factor)))
    fail("{}: rope_scaling_factor must be positive, is {}", where, rope_scaling_factor);
  if (sliding_window < 0 || swa_pattern < 0)
    fail("{}: sliding_window ({}) and swa_pattern ({}) must be >= 0", where, sliding_window, swa_pattern);
  if (sliding_window > 0 && architecture().default_swa_pattern == 0)
    fail("{}: sliding_window is {} but {} has no sliding-window layers; set it to 0", where, sliding_window, arch);
  if (!(rope_freq_base_swa > 0)) fail("{}: rope_freq_base_swa must be positive", where);
  if (!attention_layers.empty() && !architecture().has_recurrent_layers())
    fail("{}: attention_layers is \"{}\" but {} has no recurrent (convolution or DeltaNet) layers; leave it empty",
         where, attention_layers, arch);
  parse_layer_list(attention_layers, n_layers, where);
  if (architecture().recurrent_mixer == Mixer::kShortConv && !(shortconv_l_cache >= 2 && shortconv_l_cache <= 64))
    fail("{}: shortconv_l_cache must be in [2, 64], is {}", where, shortconv_l_cache);
  if (architecture().recurrent_mixer == Mixer::kGatedDeltaNet) validate_gated_deltanet(where);
  validate_experts(where);
  if (rope_dim < 0 || rope_dim % 2 != 0 || rope_dim > d_head())
    fail("{}: rope_dim must be even and in [0, head size {}], is {}", where, d_head(), rope_dim);
  if (rope_dim > 0 && rope_dim != d_head() && !architecture().partial_rope)
    fail("{}: rope_dim is {} but {} rotates whole heads (llama.cpp asserts it); set it to 0", where, rope_dim, arch);
  // llama.cpp scales Gemma 3 27B's queries by 1/sqrt(d_model / n_heads), a
  // size it recognises by its 62 layers; every other size by 1/sqrt(head size).
  if (arch == "gemma3" && n_layers == 62)
    fail("{}: a gemma3 model of 62 layers (Gemma 3 27B) has an attention scale ggtrain does not implement", where);
  if (!rope_freq_factors.empty() && int64_t(rope_freq_factors.size()) != d_head() / 2)
    fail("{}: {} has {} values, expected head size / 2 = {}", where, kRopeFreqsTensor, rope_freq_factors.size(),
         d_head() / 2);
  for (size_t i = 0; i < rope_freq_factors.size(); ++i)
    if (!(std::isfinite(rope_freq_factors[i]) && rope_freq_factors[i] > 0))
      fail("{}: {} value {} is {}; RoPE frequency factors must be positive and finite", where, kRopeFreqsTensor, i,
           rope_freq_factors[i]);
  if (donor_dim < 0) fail("{}: donor_dim must be >= 0, is {}", where, donor_dim);
  if (donor_dim > 0 && tied) fail("{}: a donor embedding (donor_dim {}) needs an untied output head", where, donor_dim);
}

void Config::validate_gated_deltanet(const std::string& where) const {
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) fail("{}: {} must be positive, is {}", where, name, v);
  };
  positive(ssm_state_size, "ssm_state_size");
  positive(ssm_group_count, "ssm_group_count");
  positive(ssm_time_step_rank, "ssm_time_step_rank");
  if (ssm_time_step_rank % ssm_group_count != 0)
    fail("{}: ssm_time_step_rank {} (value heads) is not a multiple of ssm_group_count {} (key heads)", where,
         ssm_time_step_rank, ssm_group_count);
  if (!(ssm_conv_kernel >= 2 && ssm_conv_kernel <= 64))
    fail("{}: ssm_conv_kernel must be in [2, 64], is {}", where, ssm_conv_kernel);
}

void Config::validate_experts(const std::string& where) const {
  if (d_ff_shared < 0) fail("{}: d_ff_shared must be >= 0 (0: d_ff), is {}", where, d_ff_shared);
  if (d_ff_shared > 0 && !has_shared_expert())
    fail("{}: d_ff_shared is {} but {} has no shared expert; set it to 0", where, d_ff_shared, arch);
  if (!has_experts()) {
    if (n_experts != 0 || n_experts_used != 0 || d_ff_expert != 0)
      fail("{}: n_experts, n_experts_used and d_ff_expert are for mixture-of-experts families; {} has none: set them "
           "to 0",
           where, arch);
    return;
  }
  if (n_experts > kernels::kMaxExperts)
    fail("{}: n_experts is {}; ggtrain routes at most {} experts", where, n_experts, kernels::kMaxExperts);
  if (n_experts < 1 || n_experts_used < 1 || n_experts_used > n_experts)
    fail("{}: n_experts_used ({}) must be in [1, n_experts ({})]", where, n_experts_used, n_experts);
  if (d_ff_expert < 0) fail("{}: d_ff_expert must be >= 0 (0: d_ff), is {}", where, d_ff_expert);
  if (d_ff_expert > 0 && !architecture().expert_width_key && d_ff_expert != d_ff)
    fail("{}: d_ff_expert is {} but {}'s experts are d_ff ({}) wide; set it to 0", where, d_ff_expert, arch, d_ff);
  // llama.cpp's OLMoE norms take [d_model]-wide weights for both rows.
  if (architecture().qk_norm_whole && (q_dim() != d_model || kv_dim() != d_model))
    fail("{}: {} needs n_heads x head size == n_kv_heads x head size == d_model ({}), has {} and {}", where, arch,
         d_model, q_dim(), kv_dim());
  if (architecture().qk_norm_whole && tied)
    fail("{}: {} has an untied output head (llama.cpp requires output.weight); set tied = false", where, arch);
}

int64_t Config::matmul_params() const {
  const int64_t attention = d_model * q_proj_dim() + 2 * d_model * kv_dim() + q_dim() * d_model;
  const int64_t conv = 4 * d_model * d_model;  // in_proj [3C, C] and out_proj [C, C]
  // attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out
  const int64_t gdn = d_model * (ssm_conv_dim() + 2 * ssm_value_dim() + 2 * ssm_time_step_rank);
  int64_t blocks = 0;
  for (int64_t l = 0; l < n_layers; ++l) {
    const Mixer m = mixer(l);
    blocks += m == Mixer::kShortConv ? conv : m == Mixer::kGatedDeltaNet ? gdn : attention;
    // the router and the experts a token runs: what it multiplies, not what is held
    blocks += has_experts() ? d_model * n_experts + n_experts_used * 3 * d_model * expert_ff() : 3 * d_model * d_ff;
    if (has_shared_expert()) blocks += 3 * d_model * shared_ff() + d_model;
  }
  // + the output head GEMM (+ the lens GEMM of a donor warm start)
  return blocks + vocab * d_model + donor_dim * d_model;
}

double Config::flops_per_token(int64_t seq_len) const {
  int64_t attending = 0;
  for (int64_t l = 0; l < n_layers; ++l) attending += is_recurrent_layer(l) ? 0 : 1;
  return 6.0 * double(matmul_params()) + 12.0 * double(attending * d_model * seq_len);
}

namespace {

// The multi-token-prediction blocks' tensors, copied out of the file so
// every checkpoint can write them as they were.
std::shared_ptr<const std::vector<Config::CarriedTensor>> read_nextn_tensors(const gguf::GgufFile& f, const Config& c) {
  auto carried = std::make_shared<std::vector<Config::CarriedTensor>>();
  for (const auto& t : f.tensors()) {
    const int64_t b = block_of(t.name);
    if (b < c.n_layers || b >= c.n_layers + c.n_nextn) continue;
    carried->push_back({t.name, t.type, t.shape(), std::vector<uint8_t>(t.data, t.data + t.n_bytes)});
  }
  // What llama.cpp's loader requires of each block: without them the key
  // would turn the model's own last blocks into "prediction blocks".
  for (int64_t b = c.n_layers; b < c.n_layers + c.n_nextn; ++b)
    for (const char* what : {"nextn.eh_proj", "nextn.enorm", "nextn.hnorm"}) {
      const std::string name = fmt::format("blk.{}.{}.weight", b, what);
      if (!f.find_tensor(name))
        fail("{}: {} is {}, so block {} is a multi-token-prediction block, but it has no '{}'; correct the key or "
             "convert the model again",
             f.path(), c.key("nextn_predict_layers"), c.n_nextn, b, name);
    }
  return carried;
}

}  // namespace

Config config_from_gguf(const gguf::GgufFile& f, bool embedding_is_d_model) {
  if (const gguf::Value* type = f.find("general.type");
      type && type->type == gguf::ValueType::STRING && type->s == "adapter")
    fail("{} is a LoRA adapter, not a model: use it with the base model it was trained on (generate/chat/eval -m "
         "BASE --lora {}, or export --merge-lora BASE {} OUT)",
         f.path(), f.path(), f.path());
  Config c;
  c.arch = f.get_string("general.architecture");
  if (!find_architecture(c.arch))
    fail("{}: general.architecture is '{}'; supported: {}", f.path(), c.arch, architecture_names());
  read_metadata_keys(f, c, MetadataKey::Pass::kShape);
  const auto& emb = f.tensor("token_embd.weight");
  if (emb.n_dims != 2) fail("{}: token_embd.weight has {} dimensions, expected 2", f.path(), emb.n_dims);
  if (embedding_is_d_model && emb.ne[0] != uint64_t(c.d_model))
    fail("{}: token_embd.weight has ne[0]={}, expected embedding_length {}", f.path(), emb.ne[0], c.d_model);
  c.vocab = int64_t(emb.ne[1]);
  c.tied = f.find_tensor("output.weight") == nullptr;
  c.validate(f.path());  // before d_head(): a head count of 0 would divide by zero
  read_metadata_keys(f, c, MetadataKey::Pass::kAfterShape);
  if (const gguf::TensorInfo* rf = f.find_tensor(kRopeFreqsTensor)) {
    if (rf->n_dims != 1 || rf->ne[0] != uint64_t(c.d_head() / 2))
      fail("{}: tensor '{}' has ne [{}], expected [{}] (head size / 2)", f.path(), kRopeFreqsTensor,
           fmt::join(rf->shape(), ", "), c.d_head() / 2);
    c.rope_freq_factors = quant::tensor_floats(f, *rf);
    c.validate(f.path());
  }
  if (c.n_nextn > 0) c.nextn_tensors = read_nextn_tensors(f, c);
  return c;
}

}  // namespace ggtrain::model
