// infer/imatrix and quant/importance_matrix: what each weight's inputs add
// (checked against the first layer's inputs computed here in double from the
// weights), llama-imatrix's rules (chunks, the 16-row minimum), and the two
// file formats, hostile ones included. The whole statistics against
// llama-imatrix itself: tests/compat/llama_cpp_imatrix_check.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "infer/decoder.h"
#include "infer/imatrix.h"
#include "model/params.h"
#include "quant/importance_matrix.h"
#include "support/compare.h"
#include "support/random_model.h"
#include "support/spread_tokens.h"
#include "support/temp_dir.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::compare;
using test_support::max_keeping_nan;
using test_support::small_model_config;
using test_support::spread_tokens;
using test_support::TempDir;
using test_support::within_elementwise;
using test_support::write_random_model;

namespace {

// blk.0's attention input for each token, in double: attn_norm(embd[t]).
std::vector<double> first_layer_sums(const model::Config& c, const std::vector<float>& p,
                                     const std::vector<int32_t>& window_tokens) {
  const model::ParamLayout layout(c);
  const float* embd = p.data() + layout.find("token_embd.weight")->offset;
  const float* g = p.data() + layout.find("blk.0.attn_norm.weight")->offset;
  std::vector<double> sums(size_t(c.d_model), 0.0);
  for (int32_t t : window_tokens) {
    const float* e = embd + int64_t(t) * c.d_model;
    double ms = 0;
    for (int64_t j = 0; j < c.d_model; ++j) ms += double(e[j]) * e[j];
    const double r = 1.0 / std::sqrt(ms / double(c.d_model) + c.rms_eps);
    for (int64_t j = 0; j < c.d_model; ++j) sums[size_t(j)] += std::pow(double(e[j]) * r * g[j], 2);
  }
  return sums;
}

}  // namespace

TEST(Imatrix, SumsTheSquaresOfEachMatrixInput) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  const auto p = write_random_model(c, tmp / "m.gguf");
  const int64_t n_ctx = 24, bos = 1;
  const auto toks = spread_tokens(24 * 3 + 5, c.vocab);
  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder d(f, 0, kernels::CacheType::kF32);
  const auto r = infer::collect_imatrix(d, toks, n_ctx, bos, 0, false, "calib.txt");
  EXPECT_EQ(r.matrix.chunk_count, 3u);
  EXPECT_EQ(r.matrix.chunk_size, uint32_t(n_ctx));
  EXPECT_EQ(r.matrix.datasets, std::vector<std::string>{"calib.txt"});
  ASSERT_EQ(r.matrix.entries.size(), size_t(7 * c.n_layers));  // q, k, v, output, gate, up, down; no output.weight
  for (const auto& [name, e] : r.matrix.entries) {
    EXPECT_EQ(e.counts, std::vector<int64_t>{3 * n_ctx}) << name;
    EXPECT_EQ(e.columns(), name.find("ffn_down") != std::string::npos ? c.d_ff : c.d_model) << name;
  }
  // The chunks as llama-imatrix runs them: BOS first in each.
  std::vector<int32_t> seen;
  for (int64_t ch = 0; ch < 3; ++ch)
    for (int64_t k = 0; k < n_ctx; ++k) seen.push_back(k == 0 ? int32_t(bos) : toks[size_t(ch * n_ctx + k)]);
  const auto want = first_layer_sums(c, p, seen);
  // float sums of 72 squares against double: measured 3.9e-7 relative; limit 1e-5
  double worst = 0;
  for (const char* m : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    const auto& got = r.matrix.entries.at(m).sums;
    EXPECT_TRUE(within_elementwise(compare(got, want), {.rel = 1e-5})) << m;
    for (size_t j = 0; j < want.size(); ++j)
      worst = max_keeping_nan(worst, std::fabs(double(got[j]) - want[j]) / want[j]);
  }
  std::printf("first layer's sums within %.2e of double\n", worst);
  // Control: the chunks' original first tokens (no BOS) give other sums.
  const auto no_bos = first_layer_sums(c, p, std::vector<int32_t>(toks.begin(), toks.begin() + 3 * n_ctx));
  EXPECT_FALSE(within_elementwise(compare(no_bos, want), {.rel = 1e-3}));
}

TEST(Imatrix, FollowsLlamaImatrixRules) {
  TempDir tmp;
  const auto c = small_model_config(false, 2);
  write_random_model(c, tmp / "m.gguf");
  gguf::GgufFile f(tmp / "m.gguf");
  infer::Decoder d(f);
  const auto toks = spread_tokens(40 * 4, c.vocab);
  // --chunks 2 of 4; output.weight with --process-output
  auto r = infer::collect_imatrix(d, toks, 40, 1, 2, true, "t");
  EXPECT_EQ(r.matrix.chunk_count, 2u);
  EXPECT_EQ(r.matrix.entries.at("output.weight").counts, std::vector<int64_t>{80});
  EXPECT_EQ(r.matrix.entries.at("blk.1.ffn_down.weight").counts, std::vector<int64_t>{80});
  // Chunks of fewer than 16 tokens: llama-imatrix collects nothing from them.
  r = infer::collect_imatrix(d, toks, 12, 1, 0, false, "t");
  EXPECT_TRUE(r.matrix.entries.empty());
}

TEST(ImportanceMatrix, GgufRoundTripAndValues) {
  TempDir tmp;
  quant::ImportanceMatrix m;
  m.datasets = {"a.txt", "b.txt"};
  m.chunk_count = 7;
  m.chunk_size = 512;
  m.entries["blk.0.ffn_up.weight"] = {{4, 8, 12}, {4}};
  m.entries["blk.0.ffn_up_exps.weight"] = {{2, 4, 6, 9}, {2, 0}};  // 2 experts of 2 columns, one unused
  quant::write_importance_matrix(m, tmp / "m.gguf");
  const auto back = quant::read_importance_matrix(tmp / "m.gguf");
  EXPECT_FALSE(back.legacy);
  EXPECT_TRUE(back.has_metadata);
  EXPECT_EQ(back.datasets, m.datasets);
  EXPECT_EQ(back.chunk_count, 7u);
  EXPECT_EQ(back.chunk_size, 512u);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries.at("blk.0.ffn_up_exps.weight").counts, (std::vector<int64_t>{2, 0}));
  // llama-quantize's values: sums / count, 1 for an expert no token reached
  EXPECT_EQ(quant::importance_values(back.entries.at("blk.0.ffn_up.weight"), false), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(quant::importance_values(back.entries.at("blk.0.ffn_up_exps.weight"), false),
            (std::vector<float>{1, 2, 1, 1}));
}

TEST(ImportanceMatrix, ReadsTheLegacyDat) {
  TempDir tmp;
  // As llama-imatrix --output-format dat writes it: (sum / count) * ncall per value.
  std::string b;
  auto i32 = [&](int32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  i32(1);
  i32(19);
  b += "blk.3.attn_k.weight";
  i32(5);  // ncall
  i32(2);
  for (float v : {10.0f, 2.5f}) b.append(reinterpret_cast<const char*>(&v), 4);
  i32(5);  // chunks
  i32(9);
  b += "calib.txt";
  std::ofstream(tmp / "m.dat", std::ios::binary) << b;
  const auto m = quant::read_importance_matrix(tmp / "m.dat");
  EXPECT_TRUE(m.legacy);
  EXPECT_EQ(m.chunk_count, 5u);
  EXPECT_EQ(m.datasets, std::vector<std::string>{"calib.txt"});
  EXPECT_EQ(quant::importance_values(m.entries.at("blk.3.attn_k.weight"), true), (std::vector<float>{2.0f, 0.5f}));
  // Cut anywhere inside an entry: one clear error naming the file.
  for (size_t cut : {size_t(2), size_t(10), size_t(30), size_t(35)}) {
    std::ofstream(tmp / "cut.dat", std::ios::binary) << b.substr(0, cut);
    try {
      quant::read_importance_matrix(tmp / "cut.dat");
      ADD_FAILURE() << "a .dat cut at " << cut << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.dat"), std::string::npos) << e.what();
    }
  }
}

TEST(ImportanceMatrix, RefusesHostileFiles) {
  TempDir tmp;
  auto refused = [&](const std::string& path, const std::string& words) {
    try {
      quant::read_importance_matrix(path);
      ADD_FAILURE() << path << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  // a model GGUF, not an importance matrix
  const auto c = small_model_config(false, 2);
  write_random_model(c, tmp / "model.gguf");
  refused(tmp / "model.gguf", "not an importance matrix");
  // sums without their counts, and a non-finite sum
  {
    gguf::GgufWriter w;
    std::vector<float> s{1, 2};
    w.add_tensor_raw("blk.0.attn_q.weight.in_sum2", gguf::TensorType::F32, {2, 1}, s.data());
    w.write(tmp / "half.gguf");
  }
  refused(tmp / "half.gguf", ".counts");
  quant::ImportanceMatrix m;
  m.entries["blk.0.attn_q.weight"] = {{1, NAN}, {3}};
  quant::write_importance_matrix(m, tmp / "nan.gguf");
  refused(tmp / "nan.gguf", "finite");
  // a negative entry count and a huge name length in a .dat
  std::string b(4, '\0');
  const int32_t minus = -1;
  std::memcpy(b.data(), &minus, 4);
  std::ofstream(tmp / "neg.dat", std::ios::binary) << b;
  refused(tmp / "neg.dat", "entry count");
  std::string h;
  for (int32_t v : {1, 2000000000}) h.append(reinterpret_cast<const char*>(&v), 4);
  std::ofstream(tmp / "long.dat", std::ios::binary) << h;
  refused(tmp / "long.dat", "truncated");
}
