#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <string_view>

#include "model/checkpoint.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "util/error.h"
#include "util/rng.h"

namespace ggtrain::model {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void init_lora(const ParamLayout& layout, float* params, uint64_t seed) {
  Rng rng(seed ^ 0x6c6f7261ULL);  // "lora": a stream of its own
  for (const auto& t : layout.tensors()) {
    float* p = params + t.offset;
    if (ends_with(t.name, ".lora_b")) {
      std::fill(p, p + t.size, 0.0f);
    } else if (ends_with(t.name, ".lora_a")) {
      const double bound = 1.0 / std::sqrt(double(t.shape.back()));  // [rank, in] or [experts, rank, in]
      for (int64_t i = 0; i < t.size; ++i) p[i] = float((rng.uniform() * 2.0 - 1.0) * bound);
    }
  }
}

void add_lora_adapter(gguf::GgufWriter& w, const Config& c, const ParamLayout& layout, const float* params,
                      const std::string& base_path) {
  using gguf::Value;
  w.set("general.architecture", Value::str(c.arch));  // llama.cpp refuses an adapter of another architecture
  w.set("general.type", Value::str("adapter"));
  w.set("adapter.type", Value::str("lora"));
  w.set("adapter.lora.alpha", Value::f32(float(c.lora.alpha)));
  if (!base_path.empty()) w.set(kAdapterBaseKey, Value::str(base_path));
  for (const auto& t : layout.tensors())
    if (ends_with(t.name, ".lora_a") || ends_with(t.name, ".lora_b"))
      quant::add_float_tensor(w, t.name, gguf::TensorType::F32, ggml_ne(t.shape), params + t.offset);
}

LoraAdapter lora_adapter_of(const Config& c, const ParamLayout& layout, const float* params) {
  LoraAdapter out;
  out.alpha = c.lora.alpha;
  auto copy = [&](const ParamTensor& t) { return std::vector<float>(params + t.offset, params + t.offset + t.size); };
  // The layout's pairs, not every layer's targets: a hybrid's layer has
  // only its own mixer's matrices.
  for (const ParamTensor& a : layout.tensors()) {
    if (!ends_with(a.name, ".lora_a")) continue;
    LoraPair p;
    p.weight = a.name.substr(0, a.name.size() - std::string_view(".lora_a").size());
    const ParamTensor& b = layout.get(p.weight + ".lora_b");
    const size_t d = a.shape.size();  // 3 for an expert stack: [experts, rank, in]
    p.experts = d == 3 ? a.shape[0] : 1;
    p.rank = a.shape[d - 2];
    p.in = a.shape[d - 1];
    p.out = b.shape[d - 2];
    p.a = copy(a);
    p.b = copy(b);
    out.pairs.push_back(std::move(p));
  }
  return out;
}

namespace {

// " (PATH)", the base model a ggtrain adapter records it was trained on.
std::string trained_on(const gguf::GgufFile& adapter) {
  const gguf::Value* v = adapter.find(kAdapterBaseKey);
  return v && v->type == gguf::ValueType::STRING ? " (" + v->s + ")" : "";
}

}  // namespace

LoraAdapter read_lora_adapter(const gguf::GgufFile& f, const Config& base) {
  auto str = [&](const char* key) {
    const auto* v = f.find(key);
    if (!v || v->type != gguf::ValueType::STRING) fail("{}: not a LoRA adapter: '{}' is missing", f.path(), key);
    return v->s;
  };
  if (str("general.type") != "adapter") fail("{}: general.type is not \"adapter\"", f.path());
  if (str("adapter.type") != "lora") fail("{}: adapter.type is not \"lora\"", f.path());
  if (str("general.architecture") != base.arch)
    fail("{}: the adapter is for a '{}' model, not '{}'", f.path(), str("general.architecture"), base.arch);
  LoraAdapter out;
  out.alpha = f.get_float_or("adapter.lora.alpha", 0.0);
  if (!std::isfinite(out.alpha)) fail("{}: adapter.lora.alpha is not finite", f.path());
  const ParamLayout layout(base);
  static const std::regex pair_name(R"((.+\.weight)\.lora_(a|b))");
  for (const auto& ta : f.tensors()) {
    std::smatch m;
    if (!std::regex_match(ta.name, m, pair_name))
      fail("{}: unexpected tensor '{}' in a LoRA adapter", f.path(), ta.name);
    if (m[2] != "a") continue;
    LoraPair p;
    p.weight = m[1];
    const auto* wt = layout.find(p.weight);
    if (!wt || wt->shape.size() < 2 || p.weight == "token_embd.weight")
      fail("{}: tensor '{}' adapts '{}', which is no matrix of this model", f.path(), ta.name, p.weight);
    const size_t d = wt->shape.size();  // 3: a stack of experts' matrices, one pair per expert
    p.experts = d == 3 ? wt->shape[0] : 1;
    p.out = wt->shape[d - 2];
    p.in = wt->shape[d - 1];
    const auto* tb = f.find_tensor(p.weight + ".lora_b");
    if (!tb) fail("{}: '{}' has no '{}.lora_b'", f.path(), ta.name, p.weight);
    const uint64_t experts_a = d == 3 ? ta.ne[2] : 1, experts_b = d == 3 ? tb->ne[2] : 1;
    if (ta.n_dims != uint32_t(d) || tb->n_dims != uint32_t(d) || ta.ne[0] != uint64_t(p.in) ||
        tb->ne[1] != uint64_t(p.out) || ta.ne[1] != tb->ne[0] || ta.ne[1] == 0 || experts_a != uint64_t(p.experts) ||
        experts_b != uint64_t(p.experts))
      fail("{}: '{}' / '.lora_b' have ne [{}] / [{}]; expected [{}, r{}] / [r, {}{}]: the adapter was trained on "
           "another base model{}; give that one",
           f.path(), ta.name, fmt::join(ta.shape(), ", "), fmt::join(tb->shape(), ", "), p.in,
           d == 3 ? fmt::format(", {}", p.experts) : "", p.out, d == 3 ? fmt::format(", {}", p.experts) : "",
           trained_on(f));
    p.rank = int64_t(ta.ne[1]);
    p.a = quant::tensor_floats(f, ta);
    p.b = quant::tensor_floats(f, *tb);
    out.pairs.push_back(std::move(p));
  }
  for (const auto& tb : f.tensors())
    if (ends_with(tb.name, ".lora_b") && !f.find_tensor(tb.name.substr(0, tb.name.size() - 1) + "a"))
      fail("{}: '{}' has no matching .lora_a", f.path(), tb.name);
  if (out.pairs.empty()) fail("{}: the adapter has no tensors", f.path());
  return out;
}

void lora_row_delta(const float* a, const float* b, int64_t rank, int64_t in, int64_t o, double scale, double* delta) {
  std::fill(delta, delta + in, 0.0);
  for (int64_t k = 0; k < rank; ++k) {
    const double bk = double(b[o * rank + k]);
    const float* ak = a + k * in;
    for (int64_t i = 0; i < in; ++i) delta[i] += bk * double(ak[i]);
  }
  for (int64_t i = 0; i < in; ++i) delta[i] *= scale;
}

void merge_lora(const LoraAdapter& adapter, double user_scale, const ParamLayout& layout, float* params) {
  for (const auto& p : adapter.pairs) {
    const double s = adapter.scale_of(p, user_scale);
    for (int64_t e = 0; e < p.experts; ++e) {  // each expert's matrix by its own pair
      float* w = params + layout.get(p.weight).offset + e * p.out * p.in;
      const float *a = p.a.data() + e * p.rank * p.in, *b = p.b.data() + e * p.out * p.rank;
#pragma omp parallel
      {
        std::vector<double> delta(size_t(p.in));
#pragma omp for schedule(static)
        for (int64_t o = 0; o < p.out; ++o) {
          lora_row_delta(a, b, p.rank, p.in, o, s, delta.data());
          for (int64_t i = 0; i < p.in; ++i) w[o * p.in + i] = float(double(w[o * p.in + i]) + delta[i]);
        }
      }
    }
  }
}

}  // namespace ggtrain::model
