// LoRA: the adapted model (training forward), the adapter file llama.cpp
// reads, the decoder applying it, merging, and whole LoRA runs on F32 and
// Q8_0 bases that the tests train and export.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "convert/export.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "infer/decoder.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/quantized_base.h"
#include "model/transformer.h"
#include "quant/gguf_floats.h"
#include "quant/recipe.h"
#include "support/compare.h"
#include "support/family_shapes.h"
#include "support/random_model.h"
#include "support/run_helpers.h"
#include "support/spread_tokens.h"
#include "support/tiny_llama.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/rng.h"

using namespace ggtrain;
using test_support::compare;
using test_support::Comparison;
using test_support::differs_by_more_than;
using test_support::spread_tokens;
using test_support::TempDir;
using test_support::within_abs;
using test_support::within_rel_to_max;

namespace {

train::RunConfig lora_config(TempDir& tmp, const std::string& base, int64_t steps) {
  train::RunConfig c = train::preset("s15");
  c.data.corpus = {tmp / "corpus.txt"};
  c.init.from = base;
  c.train.lora = {4, 8.0, {"attn_q", "attn_v", "attn_output", "ffn_down"}};
  c.train.lr_max = 1e-2;
  c.train.steps = steps;
  c.train.batch = 4;
  c.train.seq_len = 32;
  c.train.threads = 1;
  c.train.sample_every = 0;
  c.checkpoint.every = 5;
  return c;
}

}  // namespace

// A freshly initialised adapter (B = 0) leaves the base model's logits
// exactly as they are; after B moves, they change.
TEST(Lora, InitialAdapterIsTheBaseModel) {
  const model::Config c = test_support::tiny_llama(40);
  model::Config lc = c;
  lc.lora = {4, 8.0, {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}};
  model::Transformer<float> base(c, 1, 16), adapted(lc, 1, 16);
  Rng rng(3);
  for (int64_t i = 0; i < base.n_params(); ++i) base.params()[i] = float(rng.normal() * 0.3);
  std::copy(base.params(), base.params() + base.n_params(), adapted.params());  // same offsets
  model::init_lora(adapted.layout(), adapted.params(), 9);
  const auto tokens = spread_tokens(16, c.vocab);
  base.forward(tokens.data(), nullptr);
  adapted.forward(tokens.data(), nullptr);
  const size_t n_logits = size_t(16 * c.vocab);
  EXPECT_TRUE(within_abs(compare(adapted.logits(), base.logits(), n_logits), 0.0)) << "fresh adapter vs base";
  const auto& b = adapted.layout().get("blk.1.ffn_down.weight.lora_b");
  for (int64_t i = 0; i < b.size; ++i) adapted.params()[b.offset + i] = 0.05f;
  adapted.forward(tokens.data(), nullptr);
  EXPECT_TRUE(differs_by_more_than(compare(adapted.logits(), base.logits(), n_logits), 1e-3))
      << "moved adapter vs base";
}

// A LoRA run: checkpoints are adapters (no base tensors), the base is never
// written, resume is bit-exact; the decoder with the adapter computes what
// the training-time model computes; the merged export equals base + adapter.
TEST(Lora, RunWritesAdaptersThatTheDecoderAndMergeReproduce) {
  TempDir tmp("ggtrain_lora");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  const auto c = lora_config(tmp, base, 10);
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 5);

  const std::string adapter = train::weights_path(tmp / "a", 10);
  const gguf::GgufFile af(adapter), bf(base), sf(train::state_path(tmp / "a", 10));
  EXPECT_EQ(af.get_string("general.type"), "adapter");
  EXPECT_EQ(af.get_string("adapter.type"), "lora");
  EXPECT_FLOAT_EQ(float(af.get_float("adapter.lora.alpha")), 8.0f);
  EXPECT_EQ(af.tensors().size(), 2u * 4u * 2u);  // 2 layers x 4 targets x (A, B)
  uint64_t elements = 0;
  for (const auto& t : af.tensors()) elements += t.n_elements;
  EXPECT_EQ(af.get_uint("ggtrain.n_params_written"), elements);
  for (const auto& t : af.tensors()) EXPECT_NE(sf.find_tensor("adam.m." + t.name), nullptr) << t.name;
  EXPECT_EQ(sf.find_tensor("adam.m.blk.0.attn_q.weight"), nullptr);  // the base has no moments

  // The training-time model (base + LoRA tensors) vs the decoder with the adapter.
  const auto bc = model::config_from_gguf(bf);
  model::Config lc = bc;
  lc.lora = {4, 8.0, c.train.lora.targets};
  const int64_t T = 24;
  model::Transformer<float> m(lc, 1, T);
  model::load_model_params(bf, model::ParamLayout(bc), m.params());
  for (const auto& t : m.layout().tensors()) {
    if (!model::ParamLayout(bc).find(t.name)) {
      const auto v = quant::tensor_floats(af, af.tensor(t.name));
      std::copy(v.begin(), v.end(), m.params() + t.offset);
    }
  }
  const auto tokens = spread_tokens(T, bc.vocab);
  m.forward(tokens.data(), nullptr);
  infer::Decoder plain(bf), with(bf);
  with.add_lora(model::read_lora_adapter(af, bc), 1.0);
  plain.eval(tokens.data(), T, true);
  with.eval(tokens.data(), T, true);
  const size_t n_logits = size_t(T * bc.vocab);
  EXPECT_TRUE(within_abs(compare(with.logits(), m.logits(), n_logits), 1e-5))
      << "decoder with adapter vs training model";
  EXPECT_TRUE(differs_by_more_than(compare(with.logits(), plain.logits(), n_logits), 1e-3))
      << "the adapter trained: decoder with adapter vs without";

  convert::merge_lora_model(base, adapter, 1.0, tmp / "merged.gguf", gguf::TensorType::F32);
  const gguf::GgufFile mf(tmp / "merged.gguf");
  infer::Decoder merged(mf);
  merged.eval(tokens.data(), T, true);
  EXPECT_TRUE(within_abs(compare(merged.logits(), with.logits(), n_logits), 1e-5)) << "merged vs decoder with adapter";
  EXPECT_EQ(mf.find("tokenizer.ggml.tokens")->items, bf.find("tokenizer.ggml.tokens")->items);
}

// A quantized base held quantized (every GEMM dequantizes bands of its rows)
// computes what the float model computes on the dequantized weights: loss,
// LoRA gradients and logits, the vocabulary matrix in several bands, tied
// and untied; the held matrices take no room in params(). Every type the
// decoder reads as blocks; rows of 256 and 512 for the K-quants' blocks.
// A qwen3moe model too: each expert's slice of the stacked tensors is held
// (4 experts, 2 a token), the router stays F32 and takes an adapter.
class HeldBase : public ::testing::TestWithParam<gguf::TensorType> {};

TEST_P(HeldBase, ComputesTheDequantizedModel) {
  TempDir tmp("ggtrain_lora_held");
  const gguf::TensorType type = GetParam();
  model::Config c;
  c.vocab = 2100, c.d_model = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.d_ff = 512, c.ctx = 16;
  model::Config moe = c;
  moe.arch = "qwen3moe", moe.n_experts = 4, moe.n_experts_used = 2, moe.d_ff_expert = 256;
  for (const auto& [arch_config, tied] : {std::pair{c, true}, std::pair{c, false}, std::pair{moe, true}}) {
    c = arch_config;
    const bool experts = c.has_experts();
    const std::string down = experts ? "ffn_down_exps" : "ffn_down";
    SCOPED_TRACE(c.arch);
    c.tied = tied;
    const model::ParamLayout plain_layout(c);
    std::vector<float> w(size_t(plain_layout.total()));
    Rng rng(5);
    for (auto& x : w) x = float(rng.normal() * 0.3);
    gguf::GgufWriter gw;
    model::add_model_tensors(gw, c, plain_layout, w.data(), type);
    gw.write(tmp / "base.gguf");
    const gguf::GgufFile f(tmp / "base.gguf");
    ASSERT_EQ(f.tensor("blk.0." + down + ".weight").type, type);

    model::Config lc = c;
    lc.lora = {4, 8.0, {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}};
    if (experts)
      lc.lora.targets = {"attn_q", "attn_output", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    const model::QuantizedBase q(f, lc);
    // 7 matrices a layer (attention's 4 and the feed-forward's 3, or the
    // experts' 3 stacks), token_embd, output
    EXPECT_EQ(q.names().size(), size_t(7 * 2 + (tied ? 1 : 2)));
    const std::set<std::string> frozen = plain_layout.names();
    model::ModelOptions held_opts;
    held_opts.quantized = &q;
    const int64_t B = 2, T = 16;
    model::Transformer<float> held(lc, B, T, frozen, held_opts), plain(lc, B, T, frozen);
    EXPECT_EQ(held.layout().find("blk.1." + down + ".weight"), nullptr);
    // a run's memory plan sizes the activations without building the model
    EXPECT_EQ(model::Transformer<float>::planned_activation_bytes(lc, B, T, frozen, held_opts),
              held.activation_bytes());
    EXPECT_LT(held.n_params() * 10, plain.n_params());  // norms and LoRA tensors only
    for (auto* m : {&held, &plain}) {
      model::load_base_params(f, lc, m->layout(), m->params());
      model::init_lora(m->layout(), m->params(), 7);
      Rng rb(11);  // B != 0, so the LoRA branches count in the comparison
      for (const auto& t : m->layout().tensors())
        if (t.name.find(".lora_b") != std::string::npos)
          for (int64_t i = 0; i < t.size; ++i) m->params()[t.offset + i] = float(rb.normal() * 0.05);
    }
    ASSERT_EQ(held.n_trainable(), plain.n_trainable());
    const auto inputs = spread_tokens(B * T, c.vocab), targets = spread_tokens(B * T + 1, c.vocab);
    const float lh = held.forward(inputs.data(), targets.data() + 1);
    const float lp = plain.forward(inputs.data(), targets.data() + 1);
    EXPECT_NEAR(lh, lp, 1e-6 * std::fabs(lp)) << "tied " << tied;
    for (auto* m : {&held, &plain}) {
      m->zero_grad();
      m->backward();
    }
    const Comparison grads = compare(held.grads(), plain.grads(), size_t(plain.n_trainable()));
    EXPECT_TRUE(within_rel_to_max(grads, 1e-5)) << "gradients, tied " << tied;
    EXPECT_GT(grads.max_abs_ref, 0) << "tied " << tied;
    held.forward(inputs.data(), nullptr);
    plain.forward(inputs.data(), nullptr);
    EXPECT_TRUE(within_abs(compare(held.logits(), plain.logits(), size_t(B * T * c.vocab)), 1e-5))
        << "logits, tied " << tied;

    // The decoder over the run's memory (what samples during training run)
    // is the decoder over the base file with the run's adapter applied.
    gguf::GgufWriter aw;
    model::add_lora_adapter(aw, lc, held.layout(), held.params());
    aw.write(tmp / "adapter.gguf");
    infer::Decoder in_memory(lc, held.params(), &q), from_files(f);
    from_files.add_lora(model::read_lora_adapter(gguf::GgufFile(tmp / "adapter.gguf"), c), 1.0);
    in_memory.eval(inputs.data(), T, true);
    from_files.eval(inputs.data(), T, true);
    EXPECT_TRUE(within_abs(compare(in_memory.logits(), from_files.logits(), size_t(T * c.vocab)), 0.0))
        << "in-memory decoder vs base file + adapter, tied " << tied;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HeldBase,
                         ::testing::Values(gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q5_0,
                                           gguf::TensorType::Q5_1, gguf::TensorType::Q4_K, gguf::TensorType::Q5_K,
                                           gguf::TensorType::Q6_K),
                         [](const auto& info) { return std::string(gguf::type_name(info.param)); });

namespace {

// A LoRA run over the quantized file `base` printing samples every 5 steps,
// after checking that the run holds all of the tiny model's 16 matrices
// quantized.
train::RunConfig held_base_lora_config(TempDir& tmp, const std::string& base) {
  {
    const gguf::GgufFile f(base);
    EXPECT_EQ(model::QuantizedBase(f, model::config_from_gguf(f)).names().size(), 2u * 7u + 2u) << base;
  }
  auto c = lora_config(tmp, base, 10);
  c.train.sample_every = 5;
  return c;
}

}  // namespace

// A LoRA run on a Q8_0 base (held quantized) resumes bit-exactly and prints
// samples from the held model; resuming with a different base is refused.
TEST(Lora, Q8_0BaseAndAChangedBase) {
  TempDir tmp("ggtrain_lora_q8");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  convert::export_model(base, tmp / "base-q8_0.gguf", gguf::TensorType::Q8_0);
  const auto c = held_base_lora_config(tmp, tmp / "base-q8_0.gguf");
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 5);
  test_support::run_quiet(tmp / "r", c, false, 5);
  EXPECT_EQ(gguf::GgufFile(train::weights_path(tmp / "r", 5)).get_string("general.type"), "adapter");
  convert::export_model(base, tmp / "base-q8_0.gguf", gguf::TensorType::F16);  // the base changes
  try {
    test_support::run_quiet(tmp / "r", c, true);
    ADD_FAILURE() << "resume on a changed base was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("base model"), std::string::npos) << e.what();
  }
}

// A LoRA run on a Q4_K_M export (llama.cpp's recipe: on the tiny model's
// rows, not multiples of 256, mostly its Q5_0/Q8_0 fallbacks) holds every
// base matrix quantized, prints samples from it and resumes bit-exactly.
TEST(Lora, KQuantMixBaseIsHeldAndResumes) {
  TempDir tmp("ggtrain_lora_q4km");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  convert::export_quantized(base, tmp / "base-q4_k_m.gguf", quant::FileType::Q4_K_M);
  const auto c = held_base_lora_config(tmp, tmp / "base-q4_k_m.gguf");
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 5);
}

// A bf16 LoRA run on an F32 base (held in bf16: no float copy of the base)
// and on a Q8_0 one resumes bit-exactly and prints samples from the held
// model; the adapter it writes is what llama.cpp reads, in F32.
TEST(Lora, Bf16RunsResumeExactly) {
  TempDir tmp("ggtrain_lora_bf16_run");
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  convert::export_model(base, tmp / "base-q8_0.gguf", gguf::TensorType::Q8_0);
  for (const std::string& b : {base, tmp / "base-q8_0.gguf"}) {
    SCOPED_TRACE(b);
    const std::string run = b == base ? "f32" : "q8_0";
    auto c = lora_config(tmp, b, 10);
    c.train.sample_every = 5;
    c.train.precision = model::Precision::kBf16;
    test_support::expect_exact_resume(tmp / (run + "-a"), tmp / (run + "-b"), c, 5);
    const gguf::GgufFile af(train::weights_path(tmp / (run + "-a"), 10));
    EXPECT_EQ(af.get_string("general.type"), "adapter");
    for (const auto& t : af.tensors()) EXPECT_EQ(t.type, gguf::TensorType::F32) << t.name;
  }
}

// A hybrid's adapter in a run's memory (what its samples, task scores and
// rollouts decode with): Qwen3.5's Gated DeltaNet layers have no attn_q and
// its attention layer no ssm_out, so each layer has only its own pairs. The
// decoder applying them unmerged computes what the merged model computes.
TEST(Lora, HybridRunsAdapterHasEachLayersOwnPairs) {
  auto c = test_support::small_model_config(false, 2);
  c.arch = "qwen35";
  test_support::shape_family_layers(c);
  c.n_layers = 3;
  c.lora = {2, 4.0, {"attn_q", "ssm_out"}};
  const model::ParamLayout layout(c);
  std::vector<float> w(size_t(layout.total()));
  model::init_params(c.without_lora(), model::ParamLayout(c.without_lora()), w.data(), 5, 0.2);
  test_support::keep_decays(layout, w.data());
  for (const auto& t : layout.tensors())
    if (t.name.find(".lora_") != std::string::npos)
      for (int64_t i = 0; i < t.size; ++i) w[size_t(t.offset + i)] = float(0.1 * std::sin(double(i + t.offset)));
  const model::LoraAdapter adapter = model::lora_adapter_of(c, layout, w.data());
  std::set<std::string> names;
  for (const auto& p : adapter.pairs) names.insert(p.weight);
  EXPECT_EQ(names, (std::set<std::string>{"blk.0.ssm_out.weight", "blk.1.attn_q.weight", "blk.2.ssm_out.weight"}));

  const std::vector<int32_t> tokens = spread_tokens(12, c.vocab);
  infer::Decoder adapted(c, w.data());
  adapted.eval(tokens.data(), int64_t(tokens.size()), true);
  const std::vector<float> got(adapted.logits(), adapted.logits() + tokens.size() * size_t(c.vocab));
  const model::Config plain = c.without_lora();
  std::vector<float> merged(w.begin(), w.begin() + model::ParamLayout(plain).total());
  model::merge_lora(adapter, 1.0, model::ParamLayout(plain), merged.data());
  infer::Decoder reference(plain, merged.data());
  reference.eval(tokens.data(), int64_t(tokens.size()), true);
  const Comparison d = compare(got.data(), reference.logits(), int64_t(got.size()));
  EXPECT_TRUE(within_rel_to_max(d, 1e-5)) << "unmerged against merged";  // measured 6.1e-7
  // Control: the base alone.
  infer::Decoder base(plain, w.data());
  base.eval(tokens.data(), int64_t(tokens.size()), true);
  EXPECT_TRUE(differs_by_more_than(compare(base.logits(), reference.logits(), int64_t(got.size())), 1e-3));
}

TEST(Lora, BadAdaptersAreClearErrors) {
  TempDir tmp("ggtrain_lora_bad");
  const model::Config c = test_support::tiny_llama(40);
  std::vector<float> a(4 * 32, 0.1f), b(32 * 4, 0.1f), bad(5 * 32, 0.1f);
  auto write = [&](const std::string& name, auto&& add) {
    gguf::GgufWriter w;
    w.set("general.architecture", gguf::Value::str("llama"));
    w.set("general.type", gguf::Value::str("adapter"));
    w.set("adapter.type", gguf::Value::str("lora"));
    w.set("adapter.lora.alpha", gguf::Value::f32(8));
    add(w);
    w.write(tmp / name);
    return std::string(tmp / name);
  };
  auto expect_error = [&](const std::string& path, const std::string& needle) {
    try {
      model::read_lora_adapter(gguf::GgufFile(path), c);
      ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  expect_error(
      write("no_b.gguf",
            [&](auto& w) {
              quant::add_float_tensor(w, "blk.0.attn_q.weight.lora_a", gguf::TensorType::F32, {32, 4}, a.data());
            }),
      "lora_b");
  expect_error(
      write("no_a.gguf",
            [&](auto& w) {
              quant::add_float_tensor(w, "blk.0.attn_q.weight.lora_b", gguf::TensorType::F32, {4, 32}, b.data());
            }),
      "lora_a");
  expect_error(
      write("shape.gguf",
            [&](auto& w) {
              quant::add_float_tensor(w, "blk.0.attn_q.weight.lora_a", gguf::TensorType::F32, {32, 5}, bad.data());
              quant::add_float_tensor(w, "blk.0.attn_q.weight.lora_b", gguf::TensorType::F32, {4, 32}, b.data());
            }),
      "blk.0.attn_q.weight.lora_a");
  expect_error(
      write("layer.gguf",
            [&](auto& w) {
              quant::add_float_tensor(w, "blk.7.attn_q.weight.lora_a", gguf::TensorType::F32, {32, 4}, a.data());
              quant::add_float_tensor(w, "blk.7.attn_q.weight.lora_b", gguf::TensorType::F32, {4, 32}, b.data());
            }),
      "blk.7.attn_q.weight");
}
