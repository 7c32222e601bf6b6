// `ggtrain import`: per-head checkpoints (toy-from-scratch/v1) fused into a
// standard llama GGUF, the lens fold, and bad inputs. The per-head files are
// written here from the test's own arrays, and the truth they are checked
// against is computed here: the bytes of the heads laid end to end, a
// per-head forward pass in double, the fold summed in double.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "convert/import.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "infer/decoder.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/lens.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "support/cli_runner.h"
#include "support/compare.h"
#include "support/spread_tokens.h"
#include "support/temp_dir.h"
#include "util/error.h"

using namespace ggtrain;
using gguf::TensorType;
using gguf::Value;
using test_support::compare;
using test_support::spread_tokens;
using test_support::TempDir;
using test_support::within_rel_to_max;

namespace {

// Uniform in [-a, a) from a 64-bit LCG: the test's own numbers.
struct Lcg {
  uint64_t s;
  double next(double a) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return a * (double(s >> 11) / double(1ULL << 53) * 2.0 - 1.0);
  }
  std::vector<float> fill(size_t n, double a, double center = 0) {
    std::vector<float> v(n);
    for (auto& x : v) x = float(center + next(a));
    return v;
  }
};

struct Shape {
  int64_t vocab = 96, d_model = 64, n_layers = 2, n_heads = 4, n_kv = 2, d_ff = 96, ctx = 48;
  int64_t donor_dim = 0;  // > 0: token_embd is a donor table seen through a lens
  bool tied = false;
  double eps = 1e-5, base = 10000.0;
  int64_t d_head() const { return d_model / n_heads; }
};

// One tensor of a file to write: row-major data, ggml ne.
struct Spec {
  std::string name;
  TensorType type = TensorType::F32;
  std::vector<uint64_t> ne;
  std::vector<float> data;
};

struct ToyFile {
  std::vector<std::pair<std::string, Value>> meta;
  std::vector<Spec> tensors;
  Spec* find(const std::string& n) {
    for (auto& t : tensors)
      if (t.name == n) return &t;
    return nullptr;
  }
  const Spec& get(const std::string& n) const {
    for (const auto& t : tensors)
      if (t.name == n) return t;
    throw std::runtime_error("no spec " + n);
  }
  void erase(const std::string& n) {
    std::erase_if(tensors, [&](const Spec& t) { return t.name == n; });
  }
  void write(const std::string& path) const {
    gguf::GgufWriter w;
    for (const auto& [k, v] : meta) w.set(k, v);
    for (const auto& t : tensors) quant::add_float_tensor(w, t.name, t.type, t.ne, t.data.data());
    w.write(path);
  }
};

std::string head_name(int64_t l, const char* p, int64_t h) {
  return fmt::format("blk.{}.attn_{}.head_{}.weight", l, p, h);
}
// blk.L.attn_{q,k,v}.weight -> (L, "q"|"k"|"v")
std::optional<std::pair<int64_t, std::string>> parse_qkv(const std::string& name) {
  int l = 0;
  char p = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "blk.%d.attn_%c.weight%n", &l, &p, &used) == 2 && used == int(name.size()) &&
      (p == 'q' || p == 'k' || p == 'v'))
    return std::pair<int64_t, std::string>{l, std::string(1, p)};
  return std::nullopt;
}

std::string blk(int64_t l, const char* what) { return fmt::format("blk.{}.{}.weight", l, what); }

// A random per-head model in the toy format. Large-ish weights so that
// attention patterns, not just the residual stream, decide the logits.
ToyFile make_toy(const Shape& s, uint64_t seed = 7) {
  Lcg r{seed};
  ToyFile f;
  const auto D = uint64_t(s.d_model), hd = uint64_t(s.d_head()), F = uint64_t(s.d_ff);
  const auto V = uint64_t(s.vocab);
  f.meta = {{"general.architecture", Value::str("llama")},
            {"general.name", Value::str("toy per-head model")},
            {"llama.vocab_size", Value::u32(uint32_t(V))},
            {"llama.context_length", Value::u32(uint32_t(s.ctx))},
            {"llama.embedding_length", Value::u32(uint32_t(D))},
            {"llama.block_count", Value::u32(uint32_t(s.n_layers))},
            {"llama.feed_forward_length", Value::u32(uint32_t(F))},
            {"llama.attention.head_count", Value::u32(uint32_t(s.n_heads))},
            {"llama.attention.head_count_kv", Value::u32(uint32_t(s.n_kv))},
            {"llama.rope.dimension_count", Value::u32(uint32_t(hd))},
            {"llama.rope.freq_base", Value::f32(float(s.base))},
            {"llama.attention.layer_norm_rms_epsilon", Value::f32(float(s.eps))},
            {"tokenizer.ggml.model", Value::str("llama")},
            {"tokenizer.ggml.bos_token_id", Value::u32(1)},
            {"toy.checkpoint_format", Value::str("toy-from-scratch/v1")},
            {"toy.ggml_native", Value::boolean(true)}};
  if (s.donor_dim > 0) {
    const auto C = uint64_t(s.donor_dim);
    f.tensors.push_back({"token_embd.weight", TensorType::F32, {C, V}, r.fill(V * C, 1.0)});
    f.tensors.push_back({"lens.proj.weight", TensorType::F32, {C, D}, r.fill(D * C, 0.3)});
  } else {
    f.tensors.push_back({"token_embd.weight", TensorType::F32, {D, V}, r.fill(V * D, 1.0)});
  }
  for (int64_t l = 0; l < s.n_layers; ++l) {
    f.tensors.push_back({blk(l, "attn_norm"), TensorType::F32, {D}, r.fill(D, 0.2, 1.0)});
    for (const char* p : {"q", "k", "v"}) {
      const int64_t n = std::string(p) == "q" ? s.n_heads : s.n_kv;
      for (int64_t h = 0; h < n; ++h)
        f.tensors.push_back({head_name(l, p, h), TensorType::F32, {D, hd}, r.fill(hd * D, 0.4)});
    }
    f.tensors.push_back({blk(l, "attn_output"),
                         TensorType::F32,
                         {hd * uint64_t(s.n_heads), D},
                         r.fill(D * hd * uint64_t(s.n_heads), 0.2)});
    f.tensors.push_back({blk(l, "ffn_norm"), TensorType::F32, {D}, r.fill(D, 0.2, 1.0)});
    f.tensors.push_back({blk(l, "ffn_gate"), TensorType::F32, {D, F}, r.fill(F * D, 0.3)});
    f.tensors.push_back({blk(l, "ffn_up"), TensorType::F32, {D, F}, r.fill(F * D, 0.3)});
    f.tensors.push_back({blk(l, "ffn_down"), TensorType::F32, {F, D}, r.fill(D * F, 0.2)});
  }
  f.tensors.push_back({"output_norm.weight", TensorType::F32, {D}, r.fill(D, 0.2, 1.0)});
  if (!s.tied) f.tensors.push_back({"output.weight", TensorType::F32, {D, V}, r.fill(V * D, 0.3)});
  return f;
}

// Values as stored: what a reader of the per-head file gets back.
std::vector<double> stored(const std::string& path, const std::string& name) {
  gguf::GgufFile g(path);
  auto v = quant::tensor_floats(g, g.tensor(name));
  return {v.begin(), v.end()};
}

// ---- the per-head reference forward, in double --------------------------

void rmsnorm(const double* x, const std::vector<double>& w, double eps, double* y, int64_t D) {
  double ss = 0;
  for (int64_t i = 0; i < D; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / double(D) + eps);
  for (int64_t i = 0; i < D; ++i) y[i] = x[i] * r * w[size_t(i)];
}

// y[rows] = W[rows, cols] x
void matvec(const std::vector<double>& W, const double* x, double* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += W[size_t(r * cols + c)] * x[c];
    y[r] = s;
  }
}

// llama.cpp's rope mode 0: adjacent pairs rotated by pos * base^(-2i/d).
void rope(double* x, int64_t pos, int64_t d, double base) {
  for (int64_t i = 0; i < d / 2; ++i) {
    const double th = double(pos) * std::pow(base, -2.0 * double(i) / double(d));
    const double x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * std::cos(th) - x1 * std::sin(th);
    x[2 * i + 1] = x0 * std::sin(th) + x1 * std::cos(th);
  }
}

// Logits [T, vocab] of the per-head file at `path`, one head at a time: head
// h of Q reads blk.L.attn_q.head_h.weight and attends with K/V head
// h / (n_heads / n_kv), and the head outputs are laid side by side in head
// order before attn_output. `embd` is the [vocab, d_model] input table.
std::vector<double> per_head_logits(const std::string& path, const Shape& s, const std::vector<double>& embd,
                                    const std::vector<int32_t>& toks) {
  const int64_t T = int64_t(toks.size()), D = s.d_model, hd = s.d_head(), H = s.n_heads;
  const int64_t KV = s.n_kv, F = s.d_ff, V = s.vocab;
  auto W = [&](const std::string& n) { return stored(path, n); };
  std::vector<double> x(static_cast<size_t>(T * D));
  for (int64_t t = 0; t < T; ++t) std::copy_n(embd.begin() + toks[size_t(t)] * D, D, x.begin() + t * D);
  std::vector<double> h(static_cast<size_t>(D)), att(static_cast<size_t>(H * hd)),
      tmp(static_cast<size_t>(std::max(D, F)));
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const auto an = W(blk(l, "attn_norm")), wo = W(blk(l, "attn_output"));
    std::vector<std::vector<double>> q(static_cast<size_t>(H)), k(static_cast<size_t>(KV)), v(static_cast<size_t>(KV));
    for (int64_t hh = 0; hh < H; ++hh) q[size_t(hh)].resize(size_t(T * hd));
    for (int64_t g = 0; g < KV; ++g) k[size_t(g)].resize(size_t(T * hd)), v[size_t(g)].resize(size_t(T * hd));
    for (int64_t t = 0; t < T; ++t) {
      rmsnorm(&x[size_t(t * D)], an, s.eps, h.data(), D);
      for (int64_t hh = 0; hh < H; ++hh) {
        matvec(W(head_name(l, "q", hh)), h.data(), &q[size_t(hh)][size_t(t * hd)], hd, D);
        rope(&q[size_t(hh)][size_t(t * hd)], t, hd, s.base);
      }
      for (int64_t g = 0; g < KV; ++g) {
        matvec(W(head_name(l, "k", g)), h.data(), &k[size_t(g)][size_t(t * hd)], hd, D);
        rope(&k[size_t(g)][size_t(t * hd)], t, hd, s.base);
        matvec(W(head_name(l, "v", g)), h.data(), &v[size_t(g)][size_t(t * hd)], hd, D);
      }
    }
    std::vector<double> x_mid = x;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t g = hh / (H / KV);
        std::vector<double> sc(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[size_t(hh)][size_t(t * hd + i)] * k[size_t(g)][size_t(u * hd + i)];
          sc[size_t(u)] = d / std::sqrt(double(hd));
          mx = std::max(mx, sc[size_t(u)]);
        }
        double z = 0;
        for (auto& e : sc) z += (e = std::exp(e - mx));
        for (int64_t i = 0; i < hd; ++i) {
          double o = 0;
          for (int64_t u = 0; u <= t; ++u) o += sc[size_t(u)] / z * v[size_t(g)][size_t(u * hd + i)];
          att[size_t(hh * hd + i)] = o;
        }
      }
      matvec(wo, att.data(), tmp.data(), D, H * hd);
      for (int64_t i = 0; i < D; ++i) x_mid[size_t(t * D + i)] += tmp[size_t(i)];
    }
    const auto fn = W(blk(l, "ffn_norm")), wg = W(blk(l, "ffn_gate")), wu = W(blk(l, "ffn_up"));
    const auto wd = W(blk(l, "ffn_down"));
    std::vector<double> g(static_cast<size_t>(F)), u(static_cast<size_t>(F));
    for (int64_t t = 0; t < T; ++t) {
      rmsnorm(&x_mid[size_t(t * D)], fn, s.eps, h.data(), D);
      matvec(wg, h.data(), g.data(), F, D);
      matvec(wu, h.data(), u.data(), F, D);
      for (int64_t i = 0; i < F; ++i) g[size_t(i)] = g[size_t(i)] / (1.0 + std::exp(-g[size_t(i)])) * u[size_t(i)];
      matvec(wd, g.data(), tmp.data(), D, F);
      for (int64_t i = 0; i < D; ++i) x_mid[size_t(t * D + i)] += tmp[size_t(i)];
    }
    x = x_mid;
  }
  const auto on = W("output_norm.weight");
  const auto head = s.tied ? embd : W("output.weight");
  std::vector<double> logits(static_cast<size_t>(T * V));
  for (int64_t t = 0; t < T; ++t) {
    rmsnorm(&x[size_t(t * D)], on, s.eps, h.data(), D);
    matvec(head, h.data(), &logits[size_t(t * V)], V, D);
  }
  return logits;
}

std::vector<double> fold_in_double(const std::vector<double>& E, const std::vector<double>& W, int64_t vocab, int64_t C,
                                   int64_t D) {
  std::vector<double> out(static_cast<size_t>(vocab * D));
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t r = 0; r < D; ++r) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += E[size_t(v * C + c)] * W[size_t(r * C + c)];
      out[size_t(v * D + r)] = s;
    }
  return out;
}

std::vector<uint8_t> raw(const gguf::TensorInfo& t) { return {t.data, t.data + t.n_bytes}; }

void check_logits_match_per_head(const Shape& s) {
  TempDir tmp;
  make_toy(s).write(tmp / "heads.gguf");
  convert::import_checkpoint(tmp / "heads.gguf", tmp / "fused.gguf");
  const auto toks = spread_tokens(20, s.vocab);
  std::vector<double> embd = stored(tmp / "heads.gguf", "token_embd.weight");
  if (s.donor_dim > 0)
    embd = fold_in_double(embd, stored(tmp / "heads.gguf", "lens.proj.weight"), s.vocab, s.donor_dim, s.d_model);
  const auto ref = per_head_logits(tmp / "heads.gguf", s, embd, toks);
  gguf::GgufFile f(tmp / "fused.gguf");
  infer::Decoder d(f);
  d.eval(toks.data(), int64_t(toks.size()), true);
  EXPECT_TRUE(within_rel_to_max(compare(d.logits(), ref.data(), ref.size()), 1e-5))
      << "fused model's logits against the per-head model's";
}

}  // namespace

TEST(Import, FusedTensorsAreTheHeadBytesEndToEnd) {
  TempDir tmp;
  const Shape s;
  make_toy(s).write(tmp / "heads.gguf");
  const auto rep = convert::import_checkpoint(tmp / "heads.gguf", tmp / "fused.gguf");
  EXPECT_EQ(rep.fused_tensors, 6);
  EXPECT_EQ(rep.heads_read, 2 * (4 + 2 + 2));
  gguf::GgufFile in(tmp / "heads.gguf"), out(tmp / "fused.gguf");
  for (int64_t l = 0; l < s.n_layers; ++l)
    for (const char* p : {"q", "k", "v"}) {
      const int64_t n = std::string(p) == "q" ? s.n_heads : s.n_kv;
      std::vector<uint8_t> expect;
      for (int64_t h = 0; h < n; ++h) {
        const auto b = raw(in.tensor(head_name(l, p, h)));
        expect.insert(expect.end(), b.begin(), b.end());
      }
      const auto& t = out.tensor(fmt::format("blk.{}.attn_{}.weight", l, p));
      EXPECT_EQ(t.type, TensorType::F32);
      EXPECT_EQ(t.shape(), (std::vector<uint64_t>{uint64_t(s.d_model), uint64_t(n * s.d_head())}));
      EXPECT_TRUE(raw(t) == expect) << t.name;
    }
}

TEST(Import, OtherTensorsAndMetadataAreCopiedUnchanged) {
  TempDir tmp;
  const Shape s;
  auto toy = make_toy(s);
  toy.find("blk.0.ffn_gate.weight")->type = TensorType::Q8_0;  // any type, copied as bytes
  toy.find("blk.1.ffn_up.weight")->type = TensorType::F16;
  toy.find("output.weight")->type = TensorType::BF16;
  toy.write(tmp / "heads.gguf");
  const auto rep = convert::import_checkpoint(tmp / "heads.gguf", tmp / "fused.gguf");
  EXPECT_EQ(rep.dropped_keys, (std::vector<std::string>{"toy.checkpoint_format", "toy.ggml_native"}));
  gguf::GgufFile in(tmp / "heads.gguf"), out(tmp / "fused.gguf");
  int copied = 0;
  for (const auto& t : in.tensors()) {
    if (t.name.find(".head_") != std::string::npos) continue;
    const auto& o = out.tensor(t.name);
    EXPECT_EQ(o.type, t.type) << t.name;
    EXPECT_EQ(o.shape(), t.shape()) << t.name;
    EXPECT_TRUE(raw(o) == raw(t)) << t.name;
    ++copied;
  }
  EXPECT_EQ(copied, 1 + 2 * 6 + 2);
  EXPECT_EQ(rep.copied_tensors, copied);
  // Exactly the standard llama tensor set, nothing else.
  const auto c = model::config_from_gguf(out);
  const model::ParamLayout layout(c);
  ASSERT_EQ(out.tensors().size(), layout.tensors().size());
  for (size_t i = 0; i < out.tensors().size(); ++i) EXPECT_EQ(out.tensors()[i].name, layout.tensors()[i].name);
  for (const auto& [k, v] : in.metadata()) {
    if (k.rfind("toy.", 0) == 0) {
      EXPECT_EQ(out.find(k), nullptr) << k;
    } else {
      ASSERT_NE(out.find(k), nullptr) << k;
      EXPECT_TRUE(*out.find(k) == v) << k;
    }
  }
}

TEST(Import, OutputLoadsAsAnOrdinaryLlamaModel) {
  TempDir tmp;
  Shape s;
  s.n_kv = 1;
  make_toy(s).write(tmp / "heads.gguf");
  convert::import_checkpoint(tmp / "heads.gguf", tmp / "fused.gguf");
  gguf::GgufFile out(tmp / "fused.gguf");
  const auto c = model::config_from_gguf(out);
  EXPECT_EQ(c.vocab, s.vocab);
  EXPECT_EQ(c.d_model, s.d_model);
  EXPECT_EQ(c.n_layers, s.n_layers);
  EXPECT_EQ(c.n_heads, s.n_heads);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_EQ(c.d_ff, s.d_ff);
  EXPECT_EQ(c.ctx, s.ctx);
  EXPECT_FALSE(c.tied);
  const model::ParamLayout layout(c);
  std::vector<float> p(size_t(layout.total()));
  EXPECT_NO_THROW(model::load_model_params(out, layout, p.data()));
}

TEST(Import, LogitsEqualThePerHeadModelGqa) { check_logits_match_per_head(Shape{}); }
TEST(Import, LogitsEqualThePerHeadModelMha) {
  Shape s;
  s.n_kv = 4;
  check_logits_match_per_head(s);
}
TEST(Import, LogitsEqualThePerHeadModelMqaTied) {
  Shape s;
  s.n_kv = 1;
  s.tied = true;
  check_logits_match_per_head(s);
}
TEST(Import, LogitsEqualThePerHeadModelWithLens) {
  Shape s;
  s.donor_dim = 32;
  check_logits_match_per_head(s);
}

TEST(FoldLens, EqualsTheDoubleSumRoundedOnce) {
  Lcg r{11};
  for (auto [V, C, D] : {std::array<int64_t, 3>{37, 19, 23}, {16, 64, 48}, {1, 1, 1}, {50, 8, 3}}) {
    const auto E = r.fill(size_t(V * C), 2.0), W = r.fill(size_t(D * C), 0.5);
    const auto got = model::fold_lens(E.data(), V, C, W.data(), D);
    const auto ref = fold_in_double({E.begin(), E.end()}, {W.begin(), W.end()}, V, C, D);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(got[i], float(ref[i])) << V << "x" << C << "x" << D << " at " << i;
  }
}

TEST(Import, LensIsFoldedExactlyForEveryTableType) {
  for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0}) {
    SCOPED_TRACE(std::string(gguf::type_name(type)));
    TempDir tmp;
    Shape s;
    s.donor_dim = 32;
    auto toy = make_toy(s);
    toy.find("token_embd.weight")->type = type;
    toy.write(tmp / "heads.gguf");
    const auto rep = convert::import_checkpoint(tmp / "heads.gguf", tmp / "fused.gguf");
    EXPECT_TRUE(rep.lens_folded);
    EXPECT_EQ(rep.donor_dim, 32);
    // The table as the file stores it (to_float dequantizes), times W, in double.
    const auto ref = fold_in_double(stored(tmp / "heads.gguf", "token_embd.weight"),
                                    stored(tmp / "heads.gguf", "lens.proj.weight"), s.vocab, 32, s.d_model);
    gguf::GgufFile out(tmp / "fused.gguf");
    EXPECT_EQ(out.find_tensor("lens.proj.weight"), nullptr);
    const auto& t = out.tensor("token_embd.weight");
    EXPECT_EQ(t.type, TensorType::F32);
    EXPECT_EQ(t.shape(), (std::vector<uint64_t>{uint64_t(s.d_model), uint64_t(s.vocab)}));
    const auto got = quant::tensor_floats(out, t);
    size_t bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) bad += got[i] != float(ref[i]);
    EXPECT_EQ(bad, 0u);
    EXPECT_NO_THROW(model::config_from_gguf(out));
  }
}

TEST(Import, AlreadyFusedFileIsValidatedAndCopied) {
  TempDir tmp;
  make_toy(Shape{}).write(tmp / "heads.gguf");
  convert::import_checkpoint(tmp / "heads.gguf", tmp / "fused.gguf");
  const auto rep = convert::import_checkpoint(tmp / "fused.gguf", tmp / "again.gguf");
  EXPECT_EQ(rep.fused_tensors, 0);
  EXPECT_FALSE(rep.lens_folded);
  gguf::GgufFile a(tmp / "fused.gguf"), b(tmp / "again.gguf");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    EXPECT_EQ(a.tensors()[i].name, b.tensors()[i].name);
    EXPECT_TRUE(raw(a.tensors()[i]) == raw(b.tensors()[i])) << a.tensors()[i].name;
  }
  EXPECT_EQ(a.metadata().size(), b.metadata().size());
}

// ---- bad inputs: an Error naming the file and the tensor or key, no output --

struct BadCase {
  const char* what;
  std::function<void(ToyFile&, Shape&)> mutate;
  std::vector<std::string> expect;  // substrings of the message besides the input path
};
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.what; }

void set_meta(ToyFile& f, const std::string& k, Value v) {
  for (auto& [key, val] : f.meta)
    if (key == k) val = v;
}

// One case per way a per-head file can be wrong; each must fail with a line
// naming the file and what is wrong, and write nothing.
std::vector<BadCase> bad_import_cases() {
  return {
      {"head 2 of 4 missing",
       [](ToyFile& f, Shape&) { f.erase("blk.1.attn_q.head_2.weight"); },
       {"missing tensor 'blk.1.attn_q.head_2.weight'", "4 heads", "only 3"}},
      {"last kv head missing",
       [](ToyFile& f, Shape&) { f.erase("blk.0.attn_v.head_1.weight"); },
       {"'blk.0.attn_v.head_1.weight'", "missing"}},
      {"all heads of one projection missing",
       [](ToyFile& f, Shape&) {
         for (int h = 0; h < 2; ++h) f.erase(head_name(0, "k", h));
       },
       {"missing tensor 'blk.0.attn_k.weight'", "per-head"}},
      {"head with the wrong d_head",
       [](ToyFile& f, Shape&) {
         auto* t = f.find("blk.0.attn_k.head_1.weight");
         t->ne = {64, 18};
         t->data.resize(64 * 18);
       },
       {"'blk.0.attn_k.head_1.weight'", "[64, 18]", "expected [64, 16]"}},
      {"head with the wrong d_model",
       [](ToyFile& f, Shape&) {
         auto* t = f.find("blk.1.attn_q.head_0.weight");
         t->ne = {32, 16};
         t->data.resize(32 * 16);
       },
       {"'blk.1.attn_q.head_0.weight'", "[32, 16]"}},
      {"F16 head",
       [](ToyFile& f, Shape&) { f.find("blk.0.attn_q.head_3.weight")->type = TensorType::F16; },
       {"'blk.0.attn_q.head_3.weight'", "F16", "F32"}},
      {"Q8_0 head",
       [](ToyFile& f, Shape&) { f.find("blk.1.attn_v.head_0.weight")->type = TensorType::Q8_0; },
       {"'blk.1.attn_v.head_0.weight'", "Q8_0"}},
      {"more q heads than head_count",
       [](ToyFile& f, Shape&) {
         auto t = f.get("blk.0.attn_q.head_3.weight");
         t.name = "blk.0.attn_q.head_4.weight";
         f.tensors.push_back(t);
       },
       {"'blk.0.attn_q.head_4.weight'", "llama.attention.head_count is 4"}},
      {"more kv heads than head_count_kv",
       [](ToyFile& f, Shape&) {
         auto t = f.get("blk.1.attn_k.head_1.weight");
         t.name = "blk.1.attn_k.head_2.weight";
         f.tensors.push_back(t);
       },
       {"'blk.1.attn_k.head_2.weight'", "llama.attention.head_count_kv is 2"}},
      {"head_count_kv says 4 but the file has 2 kv heads",
       [](ToyFile& f, Shape&) { set_meta(f, "llama.attention.head_count_kv", Value::u32(4)); },
       {"missing tensor 'blk.0.attn_k.head_2.weight'", "4 heads"}},
      {"head_count says 2: head tensors have the wrong d_head",
       [](ToyFile& f, Shape&) {
         set_meta(f, "llama.attention.head_count", Value::u32(2));
         set_meta(f, "llama.attention.head_count_kv", Value::u32(2));
         set_meta(f, "llama.rope.dimension_count", Value::u32(32));
       },
       {"head_", "expected [64, 32]"}},
      {"layer past block_count",
       [](ToyFile& f, Shape&) {
         auto t = f.get("blk.1.attn_q.head_0.weight");
         t.name = "blk.2.attn_q.head_0.weight";
         f.tensors.push_back(t);
       },
       {"'blk.2.attn_q.head_0.weight'", "llama.block_count is 2"}},
      {"fused and per-head both present",
       [](ToyFile& f, Shape&) {
         f.tensors.push_back({"blk.0.attn_q.weight", TensorType::F32, {64, 64}, std::vector<float>(64 * 64)});
       },
       {"'blk.0.attn_q.weight'", "per-head"}},
      {"an extra tensor",
       [](ToyFile& f, Shape&) {
         f.tensors.push_back({"blk.0.attn_q_norm.weight", TensorType::F32, {8}, std::vector<float>(8)});
       },
       {"unexpected tensor 'blk.0.attn_q_norm.weight'"}},
      {"a copied tensor with the wrong shape",
       [](ToyFile& f, Shape&) {
         auto* t = f.find("blk.1.ffn_up.weight");
         t->ne = {64, 95};
         t->data.resize(64 * 95);
       },
       {"'blk.1.ffn_up.weight'", "[64, 95]", "expected [64, 96]"}},
      {"lens with the wrong d_model",
       [](ToyFile& f, Shape& s) {
         s.donor_dim = 32;
         f = make_toy(s);
         auto* t = f.find("lens.proj.weight");
         t->ne = {32, 63};
         t->data.resize(32 * 63);
       },
       {"'lens.proj.weight'", "[32, 63]", "expected [32, 64]"}},
      {"lens whose donor_dim differs from token_embd's",
       [](ToyFile& f, Shape& s) {
         s.donor_dim = 32;
         f = make_toy(s);
         auto* t = f.find("lens.proj.weight");
         t->ne = {64, 64};
         t->data.resize(64 * 64);
       },
       {"'lens.proj.weight'", "[64, 64]", "expected [32, 64]", "token_embd.weight"}},
      {"F16 lens",
       [](ToyFile& f, Shape& s) {
         s.donor_dim = 32;
         f = make_toy(s);
         f.find("lens.proj.weight")->type = TensorType::F16;
       },
       {"'lens.proj.weight'", "F16", "F32"}},
      {"lens with a tied head",
       [](ToyFile& f, Shape& s) {
         s.donor_dim = 32;
         s.tied = true;
         f = make_toy(s);
       },
       {"'lens.proj.weight'", "output.weight"}},
      {"donor-width token_embd without a lens",
       [](ToyFile& f, Shape& s) {
         s.donor_dim = 32;
         f = make_toy(s);
         f.erase("lens.proj.weight");
       },
       {"'token_embd.weight'", "[32, 96]", "expected [64, 96]"}},
      {"unknown toy format version",
       [](ToyFile& f, Shape&) { set_meta(f, "toy.checkpoint_format", Value::str("toy-from-scratch/v2")); },
       {"toy.checkpoint_format", "toy-from-scratch/v2", "toy-from-scratch/v1"}},
      {"not ggml-native",
       [](ToyFile& f, Shape&) { set_meta(f, "toy.ggml_native", Value::boolean(false)); },
       {"toy.ggml_native"}},
      {"head_count missing",
       [](ToyFile& f, Shape&) {
         std::erase_if(f.meta, [](const auto& kv) { return kv.first == "llama.attention.head_count"; });
       },
       {"llama.attention.head_count"}},
  };
}

class ImportBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(ImportBadInput, IsOneClearErrorAndWritesNothing) {
  const BadCase& c = GetParam();
  TempDir tmp("ggtrain-import-bad");
  Shape s;
  auto f = make_toy(s);
  c.mutate(f, s);
  f.write(tmp / "in.gguf");
  try {
    convert::import_checkpoint(tmp / "in.gguf", tmp / "out.gguf");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(tmp / "in.gguf"), std::string::npos) << msg;
    for (const auto& sub : c.expect) EXPECT_NE(msg.find(sub), std::string::npos) << "'" << sub << "' in: " << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp / "out.gguf"));
}

// The case's description as its test name: "head 2 of 4 missing" ->
// Head2Of4Missing.
std::string case_name(const ::testing::TestParamInfo<BadCase>& info) {
  std::string name;
  bool upper = true;
  for (const char* p = info.param.what; *p; ++p) {
    if (std::isalnum(static_cast<unsigned char>(*p))) {
      name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(*p))) : *p;
      upper = false;
    } else {
      upper = true;
    }
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cases, ImportBadInput, ::testing::ValuesIn(bad_import_cases()), case_name);

TEST(ImportCli, FusesAndReportsErrorsNamingTheFile) {
  TempDir tmp;
  make_toy(Shape{}).write(tmp / "heads.gguf");
  auto ok = test_support::run_cli({GGTRAIN_BIN, "import", tmp / "heads.gguf", tmp / "fused.gguf"}, tmp / "out1");
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("fused 16 per-head tensors into 6 attention weights"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("dropped metadata key toy.checkpoint_format"), std::string::npos) << ok.output;
  EXPECT_NO_THROW(model::config_from_gguf(gguf::GgufFile(tmp / "fused.gguf")));

  auto toy = make_toy(Shape{});
  toy.erase("blk.0.attn_k.head_0.weight");
  toy.write(tmp / "bad.gguf");
  auto bad = test_support::run_cli({GGTRAIN_BIN, "import", tmp / "bad.gguf", tmp / "x.gguf"}, tmp / "out2");
  EXPECT_EQ(bad.status, 1);
  const std::string line = test_support::error_line(bad.output);
  EXPECT_NE(line.find(tmp / "bad.gguf"), std::string::npos) << bad.output;
  EXPECT_NE(line.find("blk.0.attn_k.head_0.weight"), std::string::npos) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(tmp / "x.gguf"));
}

// A real llama model (the fixture llama.cpp has logits for) split into
// heads here and imported again gives back its tensors byte for byte and its
// metadata, so llama.cpp's logits for it hold for the imported file too.
TEST(Import, SplitThenImportGivesBackARealModel) {
  TempDir tmp;
  const std::string src = std::string(GGTRAIN_FIXTURES_DIR) + "/ref-gqa-untied-model.gguf";
  gguf::GgufFile orig(src);
  const auto c = model::config_from_gguf(orig);
  gguf::GgufWriter w;
  for (const auto& [k, v] : orig.metadata()) w.set(k, v);
  w.set("toy.checkpoint_format", Value::str("toy-from-scratch/v1"));
  w.set("toy.ggml_native", Value::boolean(true));
  const uint64_t head_bytes = uint64_t(c.d_head() * c.d_model) * 4;
  for (const auto& t : orig.tensors()) {
    const auto n = parse_qkv(t.name);
    if (!n) {
      w.add_tensor_raw(t.name, t.type, t.shape(), t.data);
      continue;
    }
    ASSERT_EQ(t.type, TensorType::F32);
    ASSERT_EQ(t.n_bytes % head_bytes, 0u);
    for (uint64_t h = 0; h < t.n_bytes / head_bytes; ++h)  // rows h*d_head .. +d_head
      w.add_tensor_raw(head_name(n->first, n->second.c_str(), int64_t(h)), TensorType::F32,
                       {uint64_t(c.d_model), uint64_t(c.d_head())}, t.data + h * head_bytes);
  }
  w.write(tmp / "heads.gguf");
  const auto rep = convert::import_checkpoint(tmp / "heads.gguf", tmp / "fused.gguf");
  EXPECT_EQ(rep.heads_read, c.n_layers * (c.n_heads + 2 * c.n_kv_heads));
  gguf::GgufFile out(tmp / "fused.gguf");
  ASSERT_EQ(out.tensors().size(), orig.tensors().size());
  for (const auto& t : orig.tensors()) {
    const auto& o = out.tensor(t.name);
    EXPECT_EQ(o.type, t.type) << t.name;
    EXPECT_EQ(o.shape(), t.shape()) << t.name;
    EXPECT_TRUE(raw(o) == raw(t)) << t.name;
  }
  for (const auto& [k, v] : orig.metadata()) {
    ASSERT_NE(out.find(k), nullptr) << k;
    EXPECT_TRUE(*out.find(k) == v) << k;
  }
  EXPECT_EQ(out.find("toy.checkpoint_format"), nullptr);
}
