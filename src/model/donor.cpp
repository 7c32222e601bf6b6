#include "model/donor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf/reader.h"
#include "model/lens.h"
#include "quant/gguf_floats.h"
#include "quant/type_traits.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/rng.h"

namespace ggtrain::model {

DonorTable load_donor_table(const std::string& path) {
  const gguf::GgufFile f(path);
  const auto* arch = f.find("general.architecture");
  if (!arch || arch->type != gguf::ValueType::STRING || arch->s != "llama")
    fail("{}: not a llama model (general.architecture must be \"llama\")", path);
  const auto* t = f.find_tensor("token_embd.weight");
  if (!t) fail("{}: no tensor 'token_embd.weight', the embedding table a donor must have", path);
  if (t->n_dims != 2 || t->ne[0] == 0 || t->ne[1] == 0)
    fail("{}: donor tensor 'token_embd.weight' must be 2-D [vocab, dim], has {} dims", path, t->n_dims);
  if (!quant::find_codec(t->type))
    fail("{}: donor tensor 'token_embd.weight' is {}; one of {} expected", path, gguf::type_name(t->type),
         quant::codec_type_names());
  DonorTable d;
  d.path = path;
  d.dim = int64_t(t->ne[0]);
  d.vocab = int64_t(t->ne[1]);
  d.table = quant::tensor_floats(f, *t);
  for (float x : d.table)
    if (!std::isfinite(x)) fail("{}: donor tensor 'token_embd.weight' holds NaN or Inf", path);
  d.checksum = fnv1a(d.table.data(), d.table.size() * sizeof(float));
  return d;
}

void init_lens(const DonorTable& donor, const ParamLayout& layout, float* params, uint64_t seed, double std) {
  double sq = 0;
  for (float x : donor.table) sq += double(x) * double(x);
  const double rms = std::sqrt(sq / double(donor.table.size()));
  // Var(x_r) = dim * Var(W) * rms(E)^2 = std^2.
  const double w_std = rms > 0 ? std / (std::sqrt(double(donor.dim)) * rms) : std;
  const auto& lens = layout.get("lens.proj.weight");
  Rng rng(seed ^ 0x6c656e73ULL);  // "lens": a stream of its own
  for (int64_t i = 0; i < lens.size; ++i) params[lens.offset + i] = float(rng.normal() * w_std);
}

FoldedModel fold_donor_model(const Config& c, const ParamLayout& layout, const float* params,
                             const float* donor_table) {
  FoldedModel out;
  out.config = c;
  out.config.donor_dim = 0;
  const ParamLayout std_layout(out.config);
  out.params.assign(size_t(std_layout.total()), 0.f);
  for (const auto& t : std_layout.tensors()) {
    if (t.name == "token_embd.weight") {
      const auto& w = layout.get("lens.proj.weight");
      auto e = fold_lens(donor_table, c.vocab, c.donor_dim, params + w.offset, c.d_model);
      std::copy(e.begin(), e.end(), out.params.begin() + t.offset);
    } else {
      const auto& src = layout.get(t.name);
      std::memcpy(out.params.data() + t.offset, params + src.offset, size_t(t.size) * sizeof(float));
    }
  }
  return out;
}

}  // namespace ggtrain::model
