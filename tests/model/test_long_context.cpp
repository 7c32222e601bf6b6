// Long context: a tiny-width model with a 2048-token context trains (flash
// attention keeps memory linear in the context), with and without
// activation recomputation, and its checkpoint is a model of that context.
#include <gtest/gtest.h>

#include <cmath>

#include "gguf/reader.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

train::RunConfig long_context_config(const std::string& corpus, const std::string& recompute) {
  auto c = test_support::tiny_run_config(corpus, 3);
  c.model.ctx = 2048;
  c.train.seq_len = 2048;
  c.train.batch = 2;
  c.train.warmup_steps = 1;
  c.train.eval_every = 3;
  c.train.eval_batches = 1;
  c.checkpoint.every = 3;
  train::apply_override(c, "train.recompute=" + recompute);
  return c;
}

}  // namespace

TEST(LongContext, Ctx2048Trains) {
  TempDir tmp("ggtrain_ctx2048");
  // ~60k tokens: 3 steps of 2 x 2048 and a validation window of 2048.
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 8000);
  const auto none = test_support::run_quiet(tmp / "none", long_context_config(tmp / "corpus.txt", "none"), false);
  EXPECT_EQ(none.last_step, 3);
  EXPECT_TRUE(std::isfinite(none.last_loss));
  EXPECT_LT(none.last_loss, none.first_loss);
  EXPECT_TRUE(std::isfinite(none.last_val_loss));
  gguf::GgufFile f(train::weights_path(tmp / "none", 3));
  EXPECT_EQ(f.get_uint("llama.context_length"), 2048u);
  // Recomputing every block gives the same run.
  const auto all = test_support::run_quiet(tmp / "all", long_context_config(tmp / "corpus.txt", "all"), false);
  EXPECT_NEAR(all.last_loss, none.last_loss, 1e-5 * none.last_loss);
}
