// Data-parallel pieces that need no MPI: the bucket and ZeRO-1 slice plan,
// AdamW on a slice against AdamW on the whole buffer, and the trainer's
// single-process pass-through.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "model/params.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed.h"
#include "parallel/zero.h"
#include "support/tiny_llama.h"

using namespace ggtrain;

namespace {

model::Config small_config(bool tied) {
  model::Config c = test_support::tiny_llama(97);
  c.n_layers = 3;
  c.tied = tied;
  return c;
}

TEST(Zero, BlockOfName) {
  EXPECT_EQ(model::block_of("blk.0.attn_q.weight"), 0);
  EXPECT_EQ(model::block_of("blk.17.ffn_down.weight"), 17);
  EXPECT_EQ(model::block_of("token_embd.weight"), -1);
  EXPECT_EQ(model::block_of("blk.x.attn_q.weight"), -1);
  EXPECT_EQ(model::block_of("blk.3"), -1);
  EXPECT_EQ(model::block_of("output.weight"), -1);
  EXPECT_EQ(model::block_of("blk.123456789.ffn_up.weight"), 123456789);
  EXPECT_EQ(model::block_of("blk.99999999999999999999.ffn_up.weight"), -1);  // would overflow
}

// Every element of every tensor is in exactly one bucket and, within it, in
// exactly one rank's slice; a block's bucket holds only that block's
// tensors; shard offsets pack each rank's slices.
TEST(Zero, PlanPartitionsEveryTensorOnce) {
  for (bool tied : {true, false}) {
    const model::ParamLayout layout(small_config(tied));
    for (int n : {1, 2, 3, 8, 64}) {
      for (int64_t max_elements : {int64_t(1) << 22, int64_t(1000)}) {
        std::vector<int> owner(size_t(layout.total()), -1);
        for (int r = 0; r < n; ++r) {
          const auto plan = parallel::plan_buckets(layout, n, r, max_elements);
          int64_t packed = 0;
          for (const auto& b : plan.buckets) {
            ASSERT_LE(b.hi - b.lo, max_elements);
            ASSERT_EQ(b.shard_at, packed);
            packed += b.counts[size_t(r)];
            int64_t covered = 0;
            for (int q = 0; q < n; ++q) {
              ASSERT_EQ(b.displs[size_t(q)], covered);
              if (b.counts[size_t(q)] > 0) {
                ASSERT_EQ((b.lo + b.displs[size_t(q)]) % 16, 0);  // vector alignment
              }
              covered += b.counts[size_t(q)];
            }
            ASSERT_EQ(covered, b.hi - b.lo);
            const int64_t lo = b.lo + b.displs[size_t(r)];
            for (int64_t i = lo; i < lo + b.counts[size_t(r)]; ++i) {
              ASSERT_EQ(owner[size_t(i)], -1) << "element " << i << " in two slices";
              owner[size_t(i)] = r;
            }
            for (const auto& t : layout.tensors())
              if (t.offset < b.hi && t.offset + t.size > b.lo) {
                EXPECT_EQ(model::block_of(t.name), b.layer) << t.name;
              }
          }
          EXPECT_EQ(packed, plan.shard_size);
        }
        for (const auto& t : layout.tensors())
          for (int64_t i = t.offset; i < t.offset + t.size; ++i)
            ASSERT_NE(owner[size_t(i)], -1) << t.name << " element " << i << " in no slice (n=" << n << ")";
      }
    }
  }
}

// ZeRO-1's update: each rank's optimizer, cut to its slices, gives
// the same bits as one AdamW step over the whole buffer (the independent
// truth here is adamw_step, itself checked against PyTorch reference states).
TEST(Zero, AdamwOnSlicesEqualsAdamwOnTheWhole) {
  const model::ParamLayout layout(small_config(false));
  const size_t n = size_t(layout.total());
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> p(n), g(n), m(n), v(n);
  for (size_t i = 0; i < n; ++i) p[i] = d(rng), g[i] = d(rng), m[i] = 0.1f * d(rng), v[i] = std::fabs(d(rng));
  optim::AdamWConfig cfg;
  auto p_whole = p, m_whole = m, v_whole = v;
  optim::adamw_step(layout, p_whole.data(), g.data(), m_whole.data(), v_whole.data(), 3, 1e-2, cfg, 0.7f);
  for (int ranks : {2, 3, 5}) {
    auto p_dp = p;
    std::vector<float> m_out(n, NAN), v_out(n, NAN);
    for (int r = 0; r < ranks; ++r) {
      const auto plan = parallel::plan_buckets(layout, ranks, r, 700);
      std::vector<float> gs(size_t(plan.shard_size));
      parallel::copy_to_shard(plan, r, g.data(), gs.data());
      // The optimizer as a ZeRO-1 rank holds it: whole at first (two updates
      // taken), then cut to the rank's slices.
      optim::AdamW opt(layout, cfg);
      opt.moments() = {m, v};
      opt.set_steps_taken(2);
      const auto slices = parallel::rank_slices(plan, r);
      opt.keep_only(slices);
      ASSERT_EQ(opt.state_floats(), 2 * plan.shard_size);
      opt.step(p_dp.data(), gs.data(), 1e-2, 0.7f);
      EXPECT_EQ(opt.steps_taken(), 3);
      for (const auto& s : slices) {
        std::copy_n(opt.moments().m.data() + s.at, s.hi - s.lo, m_out.data() + s.lo);
        std::copy_n(opt.moments().v.data() + s.at, s.hi - s.lo, v_out.data() + s.lo);
      }
    }
    for (const auto& t : layout.tensors())
      for (int64_t i = t.offset; i < t.offset + t.size; ++i) {
        ASSERT_EQ(p_dp[size_t(i)], p_whole[size_t(i)]) << t.name << " ranks " << ranks;
        ASSERT_EQ(m_out[size_t(i)], m_whole[size_t(i)]) << t.name;
        ASSERT_EQ(v_out[size_t(i)], v_whole[size_t(i)]) << t.name;
      }
  }
}

// One process: the whole batch, unchanged gradients and moments, and a
// batch that any rank count divides.
TEST(Zero, SingleProcessIsAPassThrough) {
  auto& one = parallel::single_process();
  parallel::DataParallel dp(one, 6, 16, 1);
  EXPECT_EQ(dp.local_batch(), 6);
  EXPECT_FALSE(dp.sharded());
  model::Transformer<float> model(small_config(true), dp.local_batch(), 16);
  dp.attach(model);
  EXPECT_FALSE(model.on_layer_grads);  // no hook in backward() for one process
  const int32_t tokens[6 * 16] = {};
  EXPECT_EQ(dp.local(tokens), tokens);
  EXPECT_EQ(dp.loss_share(), 1.0f);
  optim::AdamW opt(model.grad_layout(), {});
  dp.shard(opt);
  EXPECT_EQ(opt.state_floats(), 2 * model.n_trainable());
  EXPECT_EQ(dp.reduce(2.5).loss, 2.5);
  EXPECT_EQ(dp.mean_over_ranks(3.0), 3.0);
  EXPECT_EQ(dp.prepare_checkpoint(1, opt), nullptr);
}

}  // namespace
