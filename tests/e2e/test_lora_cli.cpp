// Promises of the LoRA flags through the CLI: --lora-scale means the same
// for an adapter applied unmerged (eval --lora) as for one merged into the
// weights in double (export --merge-lora), and merging straight into a
// quantized file gives the file that quantizing the float merge gives.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "support/cli_runner.h"
#include "support/files.h"
#include "support/temp_dir.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using namespace ggtrain::test_support;

namespace {

class LoraCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("ggtrain-lora-cli");
    std::ofstream out(*dir_ / "corpus.txt");
    for (int i = 0; i < 600; ++i)
      out << fmt::format("line {}: the {} quick brown foxes jump over {} lazy dogs.\n", i, i % 7, i % 13);
    out.close();
    const std::vector<std::string> common = {"--set", "data.corpus=" + (*dir_ / "corpus.txt"), "--set",
                                             "train.threads=1", "--quiet"};
    std::vector<std::string> base = {"train", "--preset", "tiny", "--run-dir", *dir_ / "base"};
    base.insert(base.end(), common.begin(), common.end());
    ok_ = cli(base).status == 0;
    std::vector<std::string> lora = {"train",
                                     "--preset",
                                     "tiny",
                                     "--run-dir",
                                     *dir_ / "lora",
                                     "--set",
                                     "init.from=" + base_model(),
                                     "--set",
                                     "train.lora.rank=4",
                                     "--set",
                                     "train.lora.targets=attn_q,attn_v,ffn_down",
                                     "--set",
                                     "train.lr_max=1e-2",
                                     "--set",
                                     "train.steps=10"};
    lora.insert(lora.end(), common.begin(), common.end());
    ok_ = ok_ && cli(lora).status == 0;
  }
  static void TearDownTestSuite() { delete dir_; }
  static CliResult cli(std::vector<std::string> args) {
    args.insert(args.begin(), GGTRAIN_BIN);
    return run_cli(args, *dir_ / "out.txt");
  }
  static std::string t(const std::string& rel) { return *dir_ / rel; }
  static std::string base_model() { return train::weights_path(t("base"), 40); }
  static std::string adapter() { return train::weights_path(t("lora"), 10); }

  // The logits of the tokens below, from `eval -m model` + extra flags.
  static std::vector<float> logits(const std::string& model, std::vector<std::string> extra, const std::string& name) {
    std::vector<std::string> a = {
        "eval",          "--cache-type", "f32", "-m", model, "--tokens", "1,40,80,120,160,200,240,280",
        "--dump-logits", t(name)};
    a.insert(a.end(), extra.begin(), extra.end());
    const CliResult r = cli(a);
    EXPECT_EQ(r.status, 0) << r.output;
    const std::string bytes = slurp(t(name));
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
  }

  static TempDir* dir_;
  static bool ok_;
};
TempDir* LoraCli::dir_ = nullptr;
bool LoraCli::ok_ = false;

// Largest |a - b|; infinite when either holds a NaN/Inf or the sizes differ.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(double(a[i]) - double(b[i]));
    if (!std::isfinite(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

}  // namespace

// Unmerged (x W^T + s x A^T B^T, at run time) against merged (W + s B A in
// double, then F32): measured up to 9.5e-7 at each CPU level (v2, v3, v4;
// scales 0.5, 1, 2), so 1e-5 leaves a 10x margin. The negative controls:
// scale 0 is the base exactly, the adapter moves the logits by 0.5-1.7, and
// the wrong scale (1 for 0.5) misses by 0.57.
TEST_F(LoraCli, ScaleMeansTheSameUnmergedAndMerged) {
  ASSERT_TRUE(ok_) << slurp(t("out.txt"));
  const auto base = logits(base_model(), {}, "base.f32");
  EXPECT_EQ(max_abs_diff(logits(base_model(), {"--lora", adapter(), "--lora-scale", "0"}, "s0.f32"), base), 0.0);
  for (const char* scale : {"0.5", "1", "2"}) {
    SCOPED_TRACE(std::string("--lora-scale ") + scale);
    const std::string merged = t(fmt::format("merged-{}.gguf", scale));
    const CliResult r = cli({"export", "--merge-lora", base_model(), adapter(), merged, "--lora-scale", scale});
    ASSERT_EQ(r.status, 0) << r.output;
    const auto unmerged = logits(base_model(), {"--lora", adapter(), "--lora-scale", scale}, "unmerged.f32");
    const auto folded = logits(merged, {}, "merged.f32");
    EXPECT_LT(max_abs_diff(unmerged, folded), 1e-5);
    EXPECT_GT(max_abs_diff(unmerged, base), 1e-2) << "the adapter changes nothing: the comparison proves nothing";
  }
  const auto half = logits(base_model(), {"--lora", adapter(), "--lora-scale", "0.5"}, "half.f32");
  EXPECT_GT(max_abs_diff(half, logits(t("merged-1.gguf"), {}, "one.f32")), 1e-3);
}

// export --merge-lora --type q8_0 in one step writes the tensors that merging
// to F32 and then quantizing writes: the logits are the same bytes.
TEST_F(LoraCli, MergingIntoAQuantizedTypeEqualsQuantizingTheMerge) {
  ASSERT_TRUE(ok_) << slurp(t("out.txt"));
  for (const char* type : {"q8_0", "q4_k_m"}) {
    SCOPED_TRACE(type);
    const std::string one = t(fmt::format("one-{}.gguf", type)), f32 = t("merged-f32.gguf"),
                      two = t(fmt::format("two-{}.gguf", type));
    ASSERT_EQ(cli({"export", "--merge-lora", base_model(), adapter(), one, "--type", type}).status, 0);
    ASSERT_EQ(cli({"export", "--merge-lora", base_model(), adapter(), f32}).status, 0);
    ASSERT_EQ(cli({"export", f32, two, "--type", type}).status, 0);
    const auto a = logits(one, {}, "one.f32"), b = logits(two, {}, "two.f32");
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    EXPECT_EQ(a.size(), b.size());
    // And it is the adapter's model, not the base's quantized.
    ASSERT_EQ(cli({"export", base_model(), t("base-q.gguf"), "--type", type}).status, 0);
    EXPECT_GT(max_abs_diff(a, logits(t("base-q.gguf"), {}, "base-q.f32")), 1e-2);
  }
}
