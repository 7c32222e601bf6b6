// train/qat: quantization-aware training. The weights a QAT forward uses
// are, tensor by tensor and bit for bit, what `export --type` of the same
// weights stores (read back and dequantized): the export is llama-quantize's
// byte for byte (llama_cpp_quantize_check), so the forward trains against
// the blocks llama.cpp will run. A whole run: the masters are what the
// checkpoint keeps, the validation loss is the quantized model's, and an
// interrupted run resumes exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "convert/export.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "quant/importance_matrix.h"
#include "quant/recipe.h"
#include "support/random_model.h"
#include "support/run_helpers.h"
#include "support/temp_dir.h"
#include "train/qat.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

// How many tensors of `exported` hold exactly the values `weights` has at
// their offsets (bitwise); the others are named in *differ.
int same_tensors(const std::string& exported, const model::ParamLayout& layout, const std::vector<float>& weights,
                 std::vector<std::string>* differ) {
  gguf::GgufFile f(exported);
  int same = 0;
  for (const auto& t : f.tensors()) {
    const model::ParamTensor* p = layout.find(t.name);
    if (!p) continue;
    const auto v = quant::tensor_floats(f, t);
    if (std::memcmp(v.data(), weights.data() + p->offset, v.size() * sizeof(float)) == 0) ++same;
    else differ->push_back(t.name);
  }
  return same;
}

// An importance matrix with an entry for every matrix of `layout` (and
// each expert's slice of a stack), values away from uniform, written as
// llama-imatrix's GGUF and read back as export --imatrix reads it.
convert::ImatrixInput write_imatrix(const model::ParamLayout& layout, const std::string& path) {
  quant::ImportanceMatrix m;
  m.datasets = {"test"};
  m.chunk_count = 3;
  m.chunk_size = 64;
  for (const auto& t : layout.tensors()) {
    if (t.shape.size() < 2) continue;
    const int64_t cols = t.shape.back(), slices = t.shape.size() == 3 ? t.shape[0] : 1;
    quant::ImatrixEntry e;
    e.counts.assign(size_t(slices), 192);
    for (int64_t i = 0; i < slices * cols; ++i) e.sums.push_back(float(192 * (0.05 + std::pow(std::sin(0.3 * i), 4))));
    m.entries[t.name] = e;
  }
  quant::write_importance_matrix(m, path);
  return convert::load_imatrix_input(path);
}

}  // namespace

// Two shapes: K-quant rows (256, 8 layers: the _M mixes raise attn_v and
// ffn_down layers) and rows of 64 (the 32-block fallbacks).
TEST(Qat, ForwardWeightsAreTheExportsBlocks) {
  TempDir tmp;
  for (const int64_t d : {256, 64}) {
    auto c = test_support::small_model_config(false, 2);
    c.d_model = d;
    c.d_ff = 2 * d;
    c.n_layers = d == 256 ? 8 : 2;
    const std::string in = tmp / ("m" + std::to_string(d) + ".gguf");
    const auto masters = test_support::write_random_model(c, in);
    const model::ParamLayout layout(c);
    for (const char* type : {"q4_k_m", "q4_0", "q6_k"}) {
      const auto ft = *quant::quantized_file_type(type);
      const std::string out = tmp / (std::string(type) + ".gguf");
      convert::export_quantized(in, out, ft);
      train::QatWeights qat(ft, c, layout);
      auto w = masters;
      qat.quantize(w.data());
      std::vector<std::string> differ;
      EXPECT_EQ(same_tensors(out, layout, w, &differ), int(layout.tensors().size()))
          << type << ", d_model " << d << ": first differing tensor " << (differ.empty() ? "" : differ[0]);
      EXPECT_GT(qat.quantized_tensors(), 0);
      qat.restore(w.data());
      EXPECT_EQ(std::memcmp(w.data(), masters.data(), w.size() * sizeof(float)), 0) << "masters restored";
      // Control: the float masters are not what the export stores.
      differ.clear();
      EXPECT_LT(same_tensors(out, layout, masters, &differ), int(layout.tensors().size()) - 2 * int(c.n_layers));
    }
    // Control: another type's recipe gives other weights.
    train::QatWeights q5(*quant::quantized_file_type("q5_k_m"), c, layout);
    auto w5 = masters;
    q5.quantize(w5.data());
    std::vector<std::string> differ;
    EXPECT_LT(same_tensors(tmp / "q4_k_m.gguf", layout, w5, &differ), int(layout.tensors().size()));
  }
}

// train.qat_imatrix: the QAT forward's weights are `export --imatrix`'s
// blocks bit for bit (a dense and an experts' model: each expert's rows
// against its own slice); without the matrix they are not.
TEST(Qat, ImportanceWeightedForwardIsTheImatrixExportsBlocks) {
  TempDir tmp;
  for (const std::string arch : {"llama", "qwen3moe"}) {
    auto c = test_support::small_model_config(false, 2);
    c.arch = arch;
    c.d_model = 256;
    c.d_ff = 512;
    if (arch == "qwen3moe") c.n_experts = 4, c.n_experts_used = 2, c.d_ff_expert = 256;
    const std::string in = tmp / (arch + ".gguf");
    const auto masters = test_support::write_random_model(c, in);
    const model::ParamLayout layout(c);
    const convert::ImatrixInput imatrix = write_imatrix(layout, tmp / (arch + "-imatrix.gguf"));
    for (const char* type : {"q4_k_m", "q4_0"}) {
      SCOPED_TRACE(arch + " " + type);
      const auto ft = *quant::quantized_file_type(type);
      const std::string out = tmp / (arch + "-" + type + ".gguf");
      const auto report = convert::export_quantized(in, out, ft, &imatrix);
      EXPECT_GT(report.weighted, 0);
      train::QatWeights qat(ft, c, layout, &imatrix);
      auto w = masters;
      qat.quantize(w.data());
      std::vector<std::string> differ;
      EXPECT_EQ(same_tensors(out, layout, w, &differ), int(layout.tensors().size()))
          << "first differing tensor " << (differ.empty() ? "" : differ[0]);
      // Control: the same type's blocks without the matrix.
      train::QatWeights plain(ft, c, layout);
      auto v = masters;
      plain.quantize(v.data());
      differ.clear();
      EXPECT_LT(same_tensors(out, layout, v, &differ), int(layout.tensors().size()) - int(c.n_layers));
    }
  }
}

// A run with train.qat: the step records carry the quantization's seconds,
// the checkpoint keeps float masters (not on the type's grid), and stopping
// after step 3 then resuming gives the uninterrupted run's weights and log.
TEST(Qat, RunKeepsMastersAndResumesExactly) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 6);
  c.train.qat = "q4_0";
  c.train.eval_every = 3;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 3);
  const auto rec = test_support::step_record(tmp / "a", 6);
  ASSERT_TRUE(rec.contains("qat_s")) << rec.dump();
  EXPECT_GE(rec["qat_s"].get<double>(), 0.0);
  // The forward really ran on other weights: the same run without QAT has
  // another first loss (same seed, data and initial masters).
  EXPECT_NE(test_support::first_loss_without_qat(tmp / "plain", c),
            test_support::step_record(tmp / "a", 1)["loss"].get<double>());
  // The checkpoint holds the masters: its export differs from it, and the
  // QAT weights of it are the export's.
  const std::string ckpt = train::weights_path(tmp / "a", 6);
  convert::export_quantized(ckpt, tmp / "a-q4_0.gguf", quant::FileType::Q4_0);
  gguf::GgufFile f(ckpt);
  const model::Config mc = model::config_from_gguf(f);
  const model::ParamLayout layout(mc);
  std::vector<float> w(size_t(layout.total()));
  model::load_model_params(f, layout, w.data());
  std::vector<std::string> differ;
  EXPECT_LT(same_tensors(tmp / "a-q4_0.gguf", layout, w, &differ), int(layout.tensors().size()));
  train::QatWeights qat(quant::FileType::Q4_0, mc, layout);
  qat.quantize(w.data());
  differ.clear();
  EXPECT_EQ(same_tensors(tmp / "a-q4_0.gguf", layout, w, &differ), int(layout.tensors().size()));
}

// train.qat_every = 3: steps 2 and 3 use the masters plus the rounding
// errors of the blocks made before step 1. Stopped after step 4 (between
// re-quantizations) and resumed, the run uses the errors its state file
// saved and ends as the uninterrupted run does; quantizing afresh at the
// resume would not. Every-step QAT gives another second step.
TEST(Qat, EveryKStepsKeepsItsRoundingAcrossAResume) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 600);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 7);
  c.train.qat = "q4_0";
  c.train.qat_every = 3;
  c.train.eval_every = 2;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 4);
  const gguf::GgufFile state(train::state_path(tmp / "b", 4));
  ASSERT_NE(state.find_tensor("qat.error.blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(state.get_string("ggtrain.qat.type"), "q4_0");
  auto every = c;
  every.train.qat_every = 1;
  every.train.steps = 2;
  test_support::run_quiet(tmp / "every", every, false);
  EXPECT_EQ(test_support::step_record(tmp / "every", 1)["loss"].get<double>(),
            test_support::step_record(tmp / "a", 1)["loss"].get<double>());
  EXPECT_NE(test_support::step_record(tmp / "every", 2)["loss"].get<double>(),
            test_support::step_record(tmp / "a", 2)["loss"].get<double>());
  // Control: the state without its errors; the resumed run then quantizes
  // anew before step 5 and ends elsewhere.
  test_support::run_quiet(tmp / "c", c, false, 4);
  const gguf::GgufFile saved(train::state_path(tmp / "c", 4));
  gguf::GgufWriter w;
  for (const auto& [k, v] : saved.metadata()) w.set(k, v);
  for (const auto& t : saved.tensors())
    if (t.name.rfind("qat.", 0) != 0) w.add_tensor_raw(t.name, t.type, t.shape(), t.data);
  w.write(tmp / "stripped.gguf");
  std::filesystem::rename(tmp / "stripped.gguf", train::state_path(tmp / "c", 4));
  test_support::run_quiet(tmp / "c", c, true);
  std::string why;
  EXPECT_FALSE(
      test_support::same_tensor_data(train::weights_path(tmp / "a", 7), train::weights_path(tmp / "c", 7), &why));
}

// Samples and rollouts inside a step run under a second scope: only the
// outer one puts the masters back, and an exception still does.
TEST(Qat, ScopesNestAndRestoreOnError) {
  const auto c = test_support::small_model_config(false, 2);
  const model::ParamLayout layout(c);
  std::vector<float> masters(size_t(layout.total()));
  for (size_t i = 0; i < masters.size(); ++i) masters[i] = float(std::sin(double(i) * 0.37));
  train::QatWeights qat(quant::FileType::Q4_0, c, layout);
  auto w = masters;
  {
    const train::QuantizedScope outer(&qat, w.data());
    const auto quantized = w;
    EXPECT_NE(quantized, masters);
    { const train::QuantizedScope inner(&qat, w.data()); }
    EXPECT_EQ(w, quantized) << "the inner scope restored the masters early";
  }
  EXPECT_EQ(w, masters);
  try {
    const train::QuantizedScope scope(&qat, w.data());
    throw std::runtime_error("a failing step");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(w, masters);
  const train::QuantizedScope none(nullptr, w.data());  // no QAT: nothing happens
  EXPECT_EQ(w, masters);
}
