#include "convert/import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <regex>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/lens.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "util/error.h"

namespace ggtrain::convert {

namespace {

using gguf::GgufFile;
using gguf::TensorInfo;
using gguf::TensorType;

constexpr const char* kToyFormat = "toy-from-scratch/v1";
constexpr const char* kLens = "lens.proj.weight";
constexpr const char* kEmbd = "token_embd.weight";

struct HeadName {
  int64_t layer = 0;
  std::string proj;  // "q", "k" or "v"
  int64_t head = 0;
  std::string fused() const { return fmt::format("blk.{}.attn_{}.weight", layer, proj); }
};

// blk.N.attn_{q,k,v}.head_H.weight with canonical decimal numbers (no
// leading zeros, at most 9 digits); any other spelling is not a head tensor.
std::optional<HeadName> parse_head_name(const std::string& name) {
  static const std::regex re(R"(blk\.(0|[1-9][0-9]{0,8})\.attn_([qkv])\.head_(0|[1-9][0-9]{0,8})\.weight)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return std::nullopt;
  return HeadName{std::stoll(m[1]), m[2], std::stoll(m[3])};
}

std::string ne_text(const TensorInfo& t) { return fmt::format("[{}]", fmt::join(t.shape(), ", ")); }

// The markers of the per-head format, when present, must be the version
// and layout this importer understands.
void check_format_markers(const GgufFile& f) {
  if (const auto* v = f.find("toy.checkpoint_format")) {
    if (v->type != gguf::ValueType::STRING || v->s != kToyFormat)
      fail("{}: toy.checkpoint_format is {}, but only \"{}\" can be imported", f.path(),
           v->type == gguf::ValueType::STRING ? "\"" + v->s + "\"" : "not a string", kToyFormat);
  }
  if (f.find("toy.ggml_native") && !f.get_bool("toy.ggml_native"))
    fail("{}: toy.ggml_native is false: the tensors are not stored in ggml order, and only "
         "ggml-native files can be imported",
         f.path());
}

// Fused tensor name -> its heads, by head index (null where absent).
using HeadMap = std::map<std::string, std::vector<const TensorInfo*>>;

HeadMap collect_heads(const GgufFile& f, const model::Config& c) {
  HeadMap heads;
  for (const auto& t : f.tensors()) {
    const auto h = parse_head_name(t.name);
    if (!h) continue;
    if (h->layer >= c.n_layers)
      fail("{}: tensor '{}' is for layer {}, but llama.block_count is {}", f.path(), t.name, h->layer, c.n_layers);
    const bool q = h->proj == "q";
    const int64_t count = q ? c.n_heads : c.n_kv_heads;
    const char* key = q ? "llama.attention.head_count" : "llama.attention.head_count_kv";
    if (h->head >= count)
      fail("{}: tensor '{}' is head {}, but {} is {} (heads 0..{})", f.path(), t.name, h->head, key, count, count - 1);
    if (t.type != TensorType::F32)
      fail("{}: tensor '{}' has type {}; per-head tensors must be F32", f.path(), t.name, gguf::type_name(t.type));
    if (t.n_dims != 2 || t.ne[0] != uint64_t(c.d_model) || t.ne[1] != uint64_t(c.d_head()))
      fail("{}: tensor '{}' has ne {}, expected [{}, {}] (d_model = llama.embedding_length, "
           "d_head = d_model / llama.attention.head_count)",
           f.path(), t.name, ne_text(t), c.d_model, c.d_head());
    auto& slots = heads[h->fused()];
    slots.resize(size_t(count), nullptr);
    slots[size_t(h->head)] = &t;
  }
  for (const auto& [fused, slots] : heads) {
    if (f.find_tensor(fused))
      fail("{}: tensor '{}' is present and so are its per-head tensors; a file must hold one or "
           "the other",
           f.path(), fused);
    for (size_t i = 0; i < slots.size(); ++i)
      if (!slots[i]) {
        const std::string stem = fused.substr(0, fused.size() - std::string(".weight").size());
        const bool q = stem.ends_with("attn_q");
        fail("{}: missing tensor '{}.head_{}.weight': {} needs {} heads ({} is {}) but only {} "
             "of them are in the file",
             f.path(), stem, i, stem, slots.size(), q ? "llama.attention.head_count" : "llama.attention.head_count_kv",
             slots.size(), std::count_if(slots.begin(), slots.end(), [](const TensorInfo* p) { return p; }));
      }
  }
  return heads;
}

// Head h's [d_head, d_model] block at element offset h*d_head*d_model.
std::vector<uint8_t> concat_heads(const std::vector<const TensorInfo*>& slots) {
  std::vector<uint8_t> out;
  for (const auto* t : slots) out.insert(out.end(), t->data, t->data + t->n_bytes);
  return out;
}

// Checks the lens against the model and the donor table; returns the
// folded F32 token_embd, row-major [vocab, d_model].
std::vector<float> fold_file_lens(const GgufFile& f, const model::Config& c, const TensorInfo& lens) {
  const auto& emb = f.tensor(kEmbd);
  if (lens.type != TensorType::F32)
    fail("{}: tensor '{}' has type {}, expected F32", f.path(), kLens, gguf::type_name(lens.type));
  if (lens.n_dims != 2 || lens.ne[1] != uint64_t(c.d_model) || lens.ne[0] != emb.ne[0])
    fail("{}: tensor '{}' has ne {}, expected [{}, {}]: [donor_dim, d_model], where donor_dim is "
         "ne[0] of token_embd.weight {} and d_model is llama.embedding_length",
         f.path(), kLens, ne_text(lens), emb.ne[0], c.d_model, ne_text(emb));
  if (c.tied)
    fail("{}: tensor '{}' needs an untied head, but the file has no output.weight (the donor's "
         "table is not the model's head)",
         f.path(), kLens);
  const auto E = quant::tensor_floats(f, emb);
  const auto W = quant::tensor_floats(f, lens);
  return model::fold_lens(E.data(), c.vocab, int64_t(emb.ne[0]), W.data(), c.d_model);
}

bool is_qkv(const std::string& name) {
  static const std::regex re(R"(blk\.[0-9]+\.attn_[qkv]\.weight)");
  return std::regex_match(name, re);
}

bool dropped_key(const std::string& k) { return k.rfind("toy.", 0) == 0 || k.rfind("ggtrain.", 0) == 0; }

}  // namespace

ImportReport import_checkpoint(const std::string& in_path, const std::string& out_path) {
  const GgufFile f(in_path);
  check_format_markers(f);
  // token_embd may still be a donor table of another width (a lens to fold).
  const model::Config c = model::config_from_gguf(f, /*embedding_is_d_model=*/false);
  const model::ParamLayout layout(c);
  const HeadMap heads = collect_heads(f, c);
  const TensorInfo* lens = f.find_tensor(kLens);
  ImportReport rep;

  for (const auto& t : f.tensors())
    if (!layout.find(t.name) && !parse_head_name(t.name) && t.name != kLens)
      fail("{}: unexpected tensor '{}' for a llama model with this configuration (the output must "
           "hold the standard llama tensors only)",
           f.path(), t.name);
  // Every output tensor checked before anything is computed or written.
  for (const auto& t : layout.tensors()) {
    if (heads.count(t.name) || (lens && t.name == kEmbd)) continue;
    const auto* ti = f.find_tensor(t.name);
    if (!ti)
      fail("{}: missing tensor '{}'{}", f.path(), t.name, is_qkv(t.name) ? " (and no per-head tensors for it)" : "");
    if (ti->shape() != model::ggml_ne(t.shape))
      fail("{}: tensor '{}' has ne {}, expected [{}]", f.path(), t.name, ne_text(*ti),
           fmt::join(model::ggml_ne(t.shape), ", "));
  }

  std::vector<std::vector<uint8_t>> fused;  // buffers must outlive w.write()
  std::vector<float> folded;
  if (lens) {
    folded = fold_file_lens(f, c, *lens);
    rep.lens_folded = true;
    rep.donor_dim = int64_t(lens->ne[0]);
  }
  gguf::GgufWriter w;
  for (const auto& [k, v] : f.metadata()) {
    if (k == "general.alignment") continue;
    if (dropped_key(k)) {
      rep.dropped_keys.push_back(k);
      continue;
    }
    w.set(k, v);
  }
  for (const auto& t : layout.tensors()) {
    const auto ne = model::ggml_ne(t.shape);
    if (auto it = heads.find(t.name); it != heads.end()) {
      fused.push_back(concat_heads(it->second));
      w.add_tensor_raw(t.name, TensorType::F32, ne, fused.back().data());
      rep.fused_tensors += 1;
      rep.heads_read += int64_t(it->second.size());
    } else if (lens && t.name == kEmbd) {
      quant::add_float_tensor(w, t.name, TensorType::F32, ne, folded.data());
    } else {
      const auto& ti = f.tensor(t.name);
      w.add_tensor_raw(t.name, ti.type, ne, ti.data);
      rep.copied_tensors += 1;
    }
  }
  w.write(out_path);
  return rep;
}

}  // namespace ggtrain::convert
