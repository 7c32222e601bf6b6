// train/run_config: presets, TOML and --set, and the errors that name the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/config.h"
#include "model/params.h"
#include "train/run_config.h"
#include "util/error.h"

using namespace ggtrain;

TEST(RunConfig, PresetsRoundTripThroughToml) {
  for (const auto& name : train::preset_names()) {
    auto c = train::preset(name);
    train::RunConfig back = train::preset("s15");
    train::apply_toml(back, train::to_toml(c), "test");
    EXPECT_EQ(train::to_toml(back), train::to_toml(c)) << name;
  }
}

// The model-family presets have the released models' shapes: with the
// real vocabulary (data.tokenizer = their tokenizer.json) they count
// exactly the parameters the released checkpoints hold (Hugging Face's
// model pages: safetensors parameter counts of Qwen/Qwen3-0.6B,
// google/gemma-3-270m, meta-llama/Llama-3.2-1B; tied heads). LiquidAI/LFM2-350M's
// count is its config.json's shape summed tensor by tensor (its page rounds it to 354M).
TEST(RunConfig, ModelFamilyPresetsCountTheReleasedModelsParameters) {
  struct Released {
    const char* preset;
    const char* arch;
    int64_t vocab;
    int64_t params;
  };
  for (const Released& r :
       {Released{"qwen3-0.6b", "qwen3", 151936, 596049920}, Released{"gemma3-270m", "gemma3", 262144, 268098176},
        Released{"llama3.2-1b", "llama", 128256, 1235814400}, Released{"smollm3-3b", "smollm3", 128256, 3075098624},
        Released{"lfm2-350m", "lfm2", 65536, 354483968}}) {
    SCOPED_TRACE(r.preset);
    const train::RunConfig c = train::preset(r.preset);
    EXPECT_NO_THROW(c.validate());
    const model::Config m = c.model_config(r.vocab);
    EXPECT_NO_THROW(m.validate("preset"));
    EXPECT_EQ(m.arch, r.arch);
    EXPECT_EQ(model::ParamLayout(m).total(), r.params);
  }
}

// The MoE presets against their model cards: Qwen3-30B-A3B 30.5 B (3.3 B
// active), OLMoE-1B-7B 6.9 B (1.3 B active), with their own vocabularies.
// The cards give one decimal, rounded one way or the other (counted here:
// 30.53 and 3.35, 6.92 and 1.28), hence 0.06.
TEST(RunConfig, MoePresetsMatchTheirModelCards) {
  struct Card {
    const char* preset;
    int64_t vocab;
    double total_b, active_b;
  };
  for (const Card& r : {Card{"qwen3-30b-a3b", 151936, 30.5, 3.3}, Card{"olmoe-1b-7b", 50304, 6.9, 1.3}}) {
    SCOPED_TRACE(r.preset);
    const model::Config m = train::preset(r.preset).model_config(r.vocab);
    EXPECT_NO_THROW(m.validate("preset"));
    const model::ParamLayout layout(m);
    int64_t experts = 0;  // the experts' weights, of which a token reads n_experts_used / n_experts
    for (const auto& t : layout.tensors())
      if (t.name.ends_with("_exps.weight")) experts += t.size;
    const double total = double(layout.total()) / 1e9;
    const double active =
        (double(layout.total() - experts) + double(experts) * double(m.n_experts_used) / double(m.n_experts)) / 1e9;
    EXPECT_NEAR(total, r.total_b, 0.06);
    EXPECT_NEAR(active, r.active_b, 0.06);
  }
}

// train.eval_tasks entries: paths, or tables with their own format, every
// and limit; TOML and --set forms read the same and the saved form reads back.
TEST(RunConfig, EvalTaskEntriesRoundTrip) {
  auto c = train::preset("tiny");
  train::apply_toml(c,
                    "[train]\neval_tasks = [\"a.csv\", {path = \"b.bin\", format = \"multiple-choice\", every = 5}, "
                    "{path = \"c.jsonl\", limit = 0}]\n",
                    "t.toml");
  ASSERT_EQ(c.train.eval_tasks.size(), 3u);
  EXPECT_EQ(c.train.eval_tasks[1].format, "multiple-choice");
  EXPECT_EQ(c.train.eval_tasks[1].every, 5);
  EXPECT_EQ(c.train.eval_tasks[1].limit, -1);
  EXPECT_EQ(c.train.eval_tasks[2].limit, 0);
  auto set = train::preset("tiny");
  train::apply_override(set, "train.eval_tasks=a.csv,b.bin@format=multiple-choice@every=5,c.jsonl@limit=0");
  EXPECT_EQ(train::to_toml(set), train::to_toml(c));
  auto back = train::preset("tiny");
  train::apply_toml(back, train::to_toml(c), "saved");
  EXPECT_EQ(train::to_toml(back), train::to_toml(c));
  c.train.eval_tasks_every = 10;
  EXPECT_EQ(c.train.every_of(c.train.eval_tasks[0]), 10);
  EXPECT_EQ(c.train.every_of(c.train.eval_tasks[1]), 5);
  for (const char* bad :
       {"[train]\neval_tasks = [{path = \"a\", every = \"often\"}]\n",
        "[train]\neval_tasks = [{path = \"a\", each = 3}]\n", "[train]\neval_tasks = [{every = 3}]\n"})
    EXPECT_THROW(train::apply_toml(c, bad, "t.toml"), Error) << bad;
  EXPECT_THROW(train::apply_override(c, "train.eval_tasks=a.csv@every=-1"), Error);
  EXPECT_THROW(train::apply_override(c, "train.eval_tasks=a.csv@often"), Error);
}

TEST(RunConfig, OverridesAndErrorsNameTheKey) {
  auto c = train::preset("tiny");
  train::apply_override(c, "train.lr_max=0.01");
  train::apply_override(c, "model.tied=true");
  EXPECT_DOUBLE_EQ(c.train.lr_max, 0.01);
  EXPECT_TRUE(c.model.tied);
  auto expect_error = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected one mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // A list through --set: names separated by commas, or the TOML array a
  // config file holds; both give the same list.
  train::apply_override(c, "train.freeze=token_embd, blk.0");
  EXPECT_EQ(c.train.freeze, (std::vector<std::string>{"token_embd", "blk.0"}));
  train::apply_override(c, R"(train.freeze=["output", "blk.1"])");
  EXPECT_EQ(c.train.freeze, (std::vector<std::string>{"output", "blk.1"}));
  expect_error([&] { train::apply_override(c, R"(train.freeze=["output", 3])"); }, "train.freeze");
  expect_error([&] { train::apply_override(c, R"(train.freeze=["output")"); }, "not a TOML array");
  expect_error([&] { train::apply_override(c, "train.lr_maxx=1"); }, "train.lr_maxx");
  expect_error([&] { train::apply_override(c, "train.steps=ten"); }, "train.steps");
  expect_error([&] { train::apply_override(c, "model.tied=yes"); }, "model.tied");
  expect_error([&] { train::apply_toml(c, "[train]\nbatch = 4\nwarmup = 3\n", "x.toml"); }, "train.warmup");
  expect_error([&] { train::apply_toml(c, "[train\n", "bad.toml"); }, "bad.toml");
  expect_error(
      [&] {
        auto d = train::preset("tiny");
        d.model.n_kv_heads = 3;
        d.validate();
      },
      "n_kv_heads");
  expect_error(
      [&] {
        auto d = train::preset("tiny");
        d.train.seq_len = 1000;
        d.validate();
      },
      "train.seq_len");
}

// The non-ASCII guard in front of toml++ must still let strings (paths) and
// comments through wherever TOML puts them: after '=', in arrays, as keys.
TEST(RunConfig, NonAsciiIsAcceptedInStringsAndComments) {
  auto c = train::preset("tiny");
  train::apply_toml(c,
                    "# \xce\x88 comment\n[data]\ncorpus = [\"/d/\xce\x88.txt\", '\xc3\xa9',\n"
                    "  \"x\"]  # \xc3\xa9\n",
                    "ok.toml");
  ASSERT_EQ(c.data.corpus.size(), 3u);
  EXPECT_EQ(c.data.corpus[0], "/d/\xce\x88.txt");
  EXPECT_EQ(c.data.corpus[1], "\xc3\xa9");
  EXPECT_EQ(c.data.corpus[2], "x");
}
