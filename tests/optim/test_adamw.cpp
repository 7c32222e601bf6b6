// optim/adamw: decoupled weight decay on matrices only, and the clip scale
// and global norm as torch.nn.utils.clip_grad_norm_ computes them.
#include <gtest/gtest.h>

#include <vector>

#include "model/params.h"
#include "optim/adamw.h"
#include "support/tiny_llama.h"

using namespace ggtrain;

TEST(AdamW, AdamWDecaysMatricesButNotNorms) {
  auto c = test_support::tiny_llama(64);
  model::ParamLayout layout(c);
  const auto n = size_t(layout.total());
  std::vector<float> p(n, 1.0f), g(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
  optim::AdamWConfig cfg;
  cfg.weight_decay = 0.5f;
  optim::adamw_step(layout, p.data(), g.data(), m.data(), v.data(), 1, 0.1, cfg);
  for (const auto& t : layout.tensors()) {
    const float expect = t.shape.size() == 2 ? 1.0f * float(1.0 - 0.1 * 0.5) : 1.0f;
    EXPECT_EQ(p[size_t(t.offset)], expect) << t.name;
  }
}

TEST(AdamW, ClipScaleFollowsTorch) {
  EXPECT_EQ(optim::clip_scale(0.5, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(optim::clip_scale(4.0, 1.0), float(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(optim::clip_scale(100.0, 0.0), 1.0f);  // disabled
  std::vector<float> g{3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(optim::grad_global_norm(g.data(), 2), 5.0);
}
