// Warm start from a donor (init.donor): the lens model, the fold into a
// standard token_embd, and whole runs with F16 and Q8_0 donors made here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "convert/export.h"
#include "gguf/reader.h"
#include "model/checkpoint.h"
#include "model/donor.h"
#include "model/transformer.h"
#include "quant/gguf_floats.h"
#include "support/compare.h"
#include "support/run_helpers.h"
#include "support/tiny_llama.h"
#include "tokenizer/tokenizer.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/rng.h"

using namespace ggtrain;
using test_support::compare;
using test_support::TempDir;
using test_support::within_abs;

namespace {

model::Config lens_config() {
  model::Config c = test_support::tiny_llama(50);
  c.donor_dim = 24;
  return c;
}

void fill_normal(float* p, int64_t n, uint64_t seed, double std) {
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) p[i] = float(rng.normal() * std);
}

// |a - b| within one float ulp of b.
bool within_one_ulp(float a, float b) {
  return a == b || a == std::nextafter(b, INFINITY) || a == std::nextafter(b, -INFINITY);
}

}  // namespace

// The folded standard model computes what the lens model computed while
// training: same logits to 1e-5.
TEST(Donor, FoldedModelHasTheTrainingTimeLogits) {
  const auto c = lens_config();
  const int64_t B = 2, T = 16;
  model::Transformer<float> lens(c, B, T);
  fill_normal(lens.params(), lens.n_params(), 1, 0.2);
  for (const auto& t : lens.layout().tensors())
    if (t.shape.size() == 1)
      for (int64_t i = 0; i < t.size; ++i) lens.params()[t.offset + i] = 1.0f + 0.1f * float(i % 3);
  fill_normal(lens.donor_table(), c.vocab * c.donor_dim, 2, 0.5);
  std::vector<int32_t> tokens(size_t(B * T));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 17 + 5) % size_t(c.vocab));
  lens.forward(tokens.data(), nullptr);

  const auto folded = model::fold_donor_model(c, lens.layout(), lens.params(), lens.donor_table());
  EXPECT_EQ(folded.config.donor_dim, 0);
  model::Transformer<float> plain(folded.config, B, T);
  ASSERT_EQ(size_t(plain.n_params()), folded.params.size());
  std::copy(folded.params.begin(), folded.params.end(), plain.params());
  plain.forward(tokens.data(), nullptr);
  const auto logits = compare(plain.logits(), lens.logits(), size_t(B * T * c.vocab));
  EXPECT_TRUE(within_abs(logits, 1e-5)) << "folded model vs lens model; largest |logit| " << logits.max_abs_ref;
  EXPECT_GT(logits.max_abs_ref, 0.1);  // the comparison is not between near-zero logits

  // token_embd is the exact fold; every other tensor is copied as it is.
  const model::ParamLayout plain_layout(folded.config);
  const auto& W = lens.layout().get("lens.proj.weight");
  const auto& emb = plain_layout.get("token_embd.weight");
  for (int64_t v = 0; v < c.vocab; ++v)
    for (int64_t r = 0; r < c.d_model; ++r) {
      double s = 0;
      for (int64_t k = 0; k < c.donor_dim; ++k)
        s += double(lens.donor_table()[v * c.donor_dim + k]) * double(lens.params()[W.offset + r * c.donor_dim + k]);
      ASSERT_TRUE(within_one_ulp(folded.params[size_t(emb.offset + v * c.d_model + r)], float(s))) << v << "," << r;
    }
  for (const auto& t : plain_layout.tensors()) {
    if (t.name == "token_embd.weight") continue;
    const auto& src = lens.layout().get(t.name);
    EXPECT_TRUE(
        std::equal(lens.params() + src.offset, lens.params() + src.offset + src.size, folded.params.begin() + t.offset))
        << t.name;
  }
}

TEST(Donor, LensModelNeedsAnUntiedHead) {
  auto c = lens_config();
  c.tied = true;
  EXPECT_THROW(c.validate("test"), Error);
}

// Whole runs: a donor trained here, exported to F16 and Q8_0, warm-starts a
// model of another width; checkpoints are standard llama GGUFs whose
// token_embd is fold(E, W); resume across a checkpoint is bit-exact.
class DonorRun : public ::testing::TestWithParam<gguf::TensorType> {};

TEST_P(DonorRun, CheckpointsAreFoldedAndResumeExactly) {
  TempDir tmp("ggtrain_donor");
  const std::string donor = tmp / "donor.gguf";
  convert::export_model(test_support::tiny_base_model(tmp.path().string()), donor, GetParam());

  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 20);
  c.init.donor = donor;
  c.model.d_model = 48;  // != the donor's 64: the lens maps 64 -> 48
  c.model.n_heads = 4;
  c.model.d_ff = 96;
  c.model.tied = true;  // overridden: a donor run always trains its own head
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 10);

  const gguf::GgufFile w(train::weights_path(tmp / "a", 20));
  const gguf::GgufFile s(train::state_path(tmp / "a", 20));
  const gguf::GgufFile d(donor);
  const auto mc = model::config_from_gguf(w);
  EXPECT_EQ(mc.d_model, 48);
  EXPECT_FALSE(mc.tied);
  EXPECT_EQ(w.find_tensor("lens.proj.weight"), nullptr);  // llama.cpp rejects extra tensors
  std::vector<float> params(size_t(model::ParamLayout(mc).total()));
  model::load_model_params(w, model::ParamLayout(mc), params.data());  // the standard tensor set
  EXPECT_EQ(w.find("tokenizer.ggml.tokens")->items, d.find("tokenizer.ggml.tokens")->items);

  // token_embd = fold(E, W): E dequantized from the donor, W from the state.
  const auto E = quant::tensor_floats(d, d.tensor("token_embd.weight"));
  const auto W = quant::tensor_floats(s, s.tensor("lens.proj.weight"));
  const auto T = quant::tensor_floats(w, w.tensor("token_embd.weight"));
  const int64_t V = mc.vocab, Dd = 64, C = 48;
  ASSERT_EQ(int64_t(E.size()), V * Dd);
  ASSERT_EQ(int64_t(W.size()), C * Dd);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t r = 0; r < C; ++r) {
      double sum = 0;
      for (int64_t k = 0; k < Dd; ++k) sum += double(E[size_t(v * Dd + k)]) * double(W[size_t(r * Dd + k)]);
      ASSERT_TRUE(within_one_ulp(T[size_t(v * C + r)], float(sum))) << v << "," << r;
    }
  // The lens has a gradient (its moments are not zero) and the state keeps
  // where the frozen table came from.
  EXPECT_EQ(s.get_string("ggtrain.donor.path"), donor);
  const auto m = quant::tensor_floats(s, s.tensor("adam.m.lens.proj.weight"));
  EXPECT_TRUE(std::any_of(m.begin(), m.end(), [](float x) { return x != 0.f; }));
  EXPECT_EQ(s.find_tensor("adam.m.token_embd.weight"), nullptr);  // frozen: no moments
}

INSTANTIATE_TEST_SUITE_P(Types, DonorRun, ::testing::Values(gguf::TensorType::F16, gguf::TensorType::Q8_0),
                         [](const auto& info) {
                           return std::string(info.param == gguf::TensorType::F16 ? "F16" : "Q8_0");
                         });

// A resumed donor run refuses a donor table that changed under it.
TEST(Donor, ResumeRefusesAChangedDonor) {
  TempDir tmp("ggtrain_donor_changed");
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 800);
  test_support::run_quiet(tmp / "donor", test_support::tiny_run_config(tmp / "corpus.txt", 10), false);
  const std::string donor = tmp / "donor.gguf";
  convert::export_model(tmp / "donor/weights/step_10.gguf", donor, gguf::TensorType::F32);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 20);
  c.init.donor = donor;
  test_support::run_quiet(tmp / "r", c, false, 10);
  convert::export_model(tmp / "donor/weights/step_10.gguf", donor, gguf::TensorType::F16);
  try {
    test_support::run_quiet(tmp / "r", c, true);
    ADD_FAILURE() << "resume with a changed donor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("donor"), std::string::npos) << e.what();
  }
}
