// data.sources: windows drawn from several prepared corpora in proportion
// to their weights, deterministically, with a data position that resumes
// exactly; one source is the plain loader.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "corpus/batch_loader.h"
#include "corpus/mixture_loader.h"
#include "corpus/token_file.h"
#include "support/run_helpers.h"
#include "train/run_config.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

constexpr int64_t kT = 8;

// A token file whose ids tell the source apart: source k holds ids
// k*1000 .. k*1000+999 (vocabulary 4000).
std::string source_file(TempDir& tmp, int k, int64_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(k * 1000 + i % 1000);
  const std::string p = tmp / fmt::format("s{}.tok", k);
  corpus::write_token_file(p, 4000, ids);
  return p;
}

}  // namespace

TEST(Mixture, DrawsInProportionToTheWeights) {
  TempDir tmp;
  corpus::TokenStream a({source_file(tmp, 0, 5000)}), b({source_file(tmp, 1, 700)});
  corpus::MixtureLoader mix({&a, &b}, {3.0, 1.0}, kT, 42);
  std::vector<int32_t> in(kT), tg(kT);
  std::map<int, int> count;
  for (int i = 0; i < 8000; ++i) {
    mix.next(1, in.data(), tg.data());
    ++count[in[0] / 1000];
  }
  EXPECT_NEAR(count[0] / 8000.0, 0.75, 0.02);
  EXPECT_NEAR(count[1] / 8000.0, 0.25, 0.02);
  // The small source went round many epochs; the large one fewer.
  EXPECT_GT(mix.state().sources[1].epoch, mix.state().sources[0].epoch);
}

TEST(Mixture, SavedStateDrawsTheSameWindowsAgain) {
  TempDir tmp;
  corpus::TokenStream a({source_file(tmp, 0, 3000)}), b({source_file(tmp, 1, 900)}), c({source_file(tmp, 2, 2000)});
  corpus::MixtureLoader first({&a, &b, &c}, {1, 2, 3}, kT, 7);
  std::vector<int32_t> in(4 * kT), tg(4 * kT), in2(4 * kT), tg2(4 * kT);
  for (int i = 0; i < 300; ++i) first.next(4, in.data(), tg.data());
  const auto saved = first.state();
  EXPECT_EQ(saved.drawn, 1200u);
  corpus::MixtureLoader second({&a, &b, &c}, {1, 2, 3}, kT, 7);
  second.set_state(saved);
  for (int i = 0; i < 300; ++i) {
    first.next(4, in.data(), tg.data());
    second.next(4, in2.data(), tg2.data());
    ASSERT_EQ(in, in2) << "batch " << i;
    ASSERT_EQ(tg, tg2) << "batch " << i;
  }
}

TEST(Mixture, OneSourceIsThePlainLoader) {
  TempDir tmp;
  corpus::TokenStream a({source_file(tmp, 0, 3000)});
  corpus::MixtureLoader mix({&a}, {1.0}, kT, 11);
  corpus::BatchLoader plain(a, kT, 11);
  std::vector<int32_t> in(kT), tg(kT), in2(kT), tg2(kT);
  for (int i = 0; i < 1000; ++i) {
    mix.next(1, in.data(), tg.data());
    plain.next(1, in2.data(), tg2.data());
    ASSERT_EQ(in, in2) << i;
  }
}

TEST(Mixture, SourcesKeyReadsTomlTablesAndSetAndRoundTrips) {
  auto c = train::preset("tiny");
  train::apply_toml(c, "[data]\nsources = [{path = \"a/*.jsonl.gz\", weight = 0.7}, {path = \"kjv.txt\"}]\n", "t.toml");
  ASSERT_EQ(c.data.sources.size(), 2u);
  EXPECT_EQ(c.data.sources[0].path, "a/*.jsonl.gz");
  EXPECT_DOUBLE_EQ(c.data.sources[0].weight, 0.7);
  EXPECT_DOUBLE_EQ(c.data.sources[1].weight, 1.0);
  auto back = train::preset("tiny");
  train::apply_toml(back, train::to_toml(c), "round trip");
  ASSERT_EQ(back.data.sources.size(), 2u);
  EXPECT_EQ(back.data.sources[1].path, "kjv.txt");
  EXPECT_DOUBLE_EQ(back.data.sources[0].weight, 0.7);
  train::apply_override(c, "data.sources=x.txt@2,y.txt");
  ASSERT_EQ(c.data.sources.size(), 2u);
  EXPECT_DOUBLE_EQ(c.data.sources[0].weight, 2.0);
  EXPECT_EQ(c.data.sources[1].path, "y.txt");
  EXPECT_THROW(train::apply_override(c, "data.sources=x.txt@-1"), Error);
  EXPECT_THROW(train::apply_toml(c, "[data]\nsources = [{path = \"a\", wieght = 1}]\n", "t.toml"), Error);
}

// Two corpora as a mixture: stopped and resumed, the run ends bit-identical
// to an uninterrupted one (the state file holds every source's position).
TEST(Mixture, RunOnTwoSourcesResumesExactly) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "a.txt", 1500);
  {
    std::ofstream b(tmp / "b.jsonl");
    for (int i = 0; i < 400; ++i) b << "{\"text\": \"the light of day " << i << " was good\"}\n";
  }
  auto c = test_support::tiny_run_config(tmp / "a.txt", 20);
  c.data.corpus.clear();
  c.data.sources = {{tmp / "a.txt", 3.0}, {tmp / "b.jsonl", 1.0}};
  test_support::expect_exact_resume(tmp / "x", tmp / "y", c, 10);
}
