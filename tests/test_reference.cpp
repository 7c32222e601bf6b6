// Our float32 forward, backward and AdamW against reference states computed
// by an independent float64 implementation, and llama.cpp's own logits.
// Tolerances are those of ../shared/fixtures/README.md.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "gguf/reader.h"
#include "model/checkpoint.h"
#include "model/llama.h"
#include "support/reference_state.h"
#include "train/adamw.h"

using namespace ggtrain;
using ggtrain::test_support::ReferenceState;
namespace ref = ggtrain::test_support;

namespace {

const std::string kShared = GGTRAIN_FIXTURES_DIR;

// max|a - r| / max|r|
double rel_err(const float* a, const std::vector<float>& r) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(r[i])));
    ref = std::max(ref, std::fabs(double(r[i])));
  }
  return diff / ref;
}

// float32 spacing at max|r|
double ulp_at_max(const std::vector<float>& r) {
  float m = 0;
  for (float x : r) m = std::max(m, std::fabs(x));
  return double(std::nextafter(m, INFINITY) - m);
}

void load_weights(model::LlamaModel<float>& m, const ReferenceState& r) {
  for (const auto& t : m.layout().tensors()) {
    const auto& w = r.weights.at(t.name);
    std::copy(w.begin(), w.end(), m.params() + t.offset);
  }
}

void check_reference(const std::string& path) {
  SCOPED_TRACE(path);
  ReferenceState r = ref::load_reference_state(path);
  model::LlamaModel<float> m(r.config, r.batch, r.seq_len);
  load_weights(m, r);

  m.forward(r.inputs.data(), nullptr);  // training keeps no logits: ask for them
  const double logit_err = rel_err(m.logits(), r.logits);
  const float loss = m.forward(r.inputs.data(), r.targets.data());
  EXPECT_LE(logit_err, 1e-5) << "logits";
  EXPECT_LE(std::fabs(double(loss) - r.loss) / r.loss, 1e-6) << "loss " << loss << " vs " << r.loss;

  m.zero_grad();
  m.backward();
  double worst_grad = 0;
  for (const auto& t : m.layout().tensors()) {
    const double e = rel_err(m.grads() + t.offset, r.grads.at(t.name));
    worst_grad = std::max(worst_grad, e);
    EXPECT_LE(e, 1e-4) << "grad." << t.name;
  }

  // AdamW from the stored weights and stored gradients: <= 4 ulp per tensor.
  const int64_t n = m.n_params();
  std::vector<float> p(size_t(n), 0.f), g(size_t(n), 0.f), mom(size_t(n), 0.f), var(size_t(n), 0.f);
  for (const auto& t : m.layout().tensors()) {
    std::copy(r.weights.at(t.name).begin(), r.weights.at(t.name).end(), p.begin() + t.offset);
    std::copy(r.grads.at(t.name).begin(), r.grads.at(t.name).end(), g.begin() + t.offset);
  }
  train::adamw_step(m.layout(), p.data(), g.data(), mom.data(), var.data(), r.adamw_step, r.lr,
                    r.adamw);
  double worst_ulps = 0;
  for (const auto& t : m.layout().tensors()) {
    const auto& ref = r.after_step.at(t.name);
    double worst = 0;
    for (int64_t i = 0; i < t.size; ++i)
      worst = std::max(worst, std::fabs(double(p[size_t(t.offset + i)]) - double(ref[size_t(i)])));
    EXPECT_LE(worst, 4 * ulp_at_max(ref)) << "adamw." << t.name;
    worst_ulps = std::max(worst_ulps, worst / ulp_at_max(ref));
  }

  // End to end from our own gradients: <= 16 ulp where |g| is 0 or >= 1e-6.
  std::fill(mom.begin(), mom.end(), 0.f);
  std::fill(var.begin(), var.end(), 0.f);
  std::copy(m.params(), m.params() + n, p.begin());
  double worst_e2e = 0;
  train::adamw_step(m.layout(), p.data(), m.grads(), mom.data(), var.data(), r.adamw_step, r.lr,
                    r.adamw);
  for (const auto& t : m.layout().tensors()) {
    const auto& ref = r.after_step.at(t.name);
    const auto& rg = r.grads.at(t.name);
    double worst = 0;
    for (int64_t i = 0; i < t.size; ++i) {
      const float gi = rg[size_t(i)];
      if (gi != 0.f && std::fabs(gi) < 1e-6f) continue;
      worst = std::max(worst, std::fabs(double(p[size_t(t.offset + i)]) - double(ref[size_t(i)])));
    }
    EXPECT_LE(worst, 16 * ulp_at_max(ref)) << "end-to-end adamw." << t.name;
    worst_e2e = std::max(worst_e2e, worst / ulp_at_max(ref));
  }
  std::printf("%s: logits err %.2e, loss rel err %.2e, worst grad err %.2e, adamw %.1f ulp, "
              "end-to-end adamw %.1f ulp\n",
              path.c_str(), logit_err, std::fabs(double(loss) - r.loss) / r.loss, worst_grad,
              worst_ulps, worst_e2e);
}

}  // namespace

TEST(Reference, EveryReferenceStateMatches) {
  auto files = ref::find_reference_states(kShared);
  ASSERT_GE(files.size(), 2u) << "expected the ref-*.gguf fixtures in " << kShared;
  for (const auto& f : files) check_reference(f);
}

TEST(Reference, LlamaCppLogitsOnFixtureModel) {
  gguf::GgufFile f(kShared + "/ref-gqa-untied-model.gguf");
  auto cfg = model::config_from_llama_gguf(f);
  EXPECT_FALSE(cfg.tied);
  EXPECT_EQ(cfg.n_kv_heads, 2);
  const int64_t T = 32;
  model::LlamaModel<float> m(cfg, 1, T);
  model::load_llama_params(f, m.layout(), m.params());
  ReferenceState r = ref::load_reference_state(kShared + "/ref-gqa-untied.gguf");
  std::vector<int32_t> row0(r.inputs.begin(), r.inputs.begin() + T);  // tokens[0, :32]
  m.forward(row0.data(), nullptr);

  std::ifstream in(kShared + "/ref-gqa-untied-llamacpp-logits.f32", std::ios::binary);
  std::vector<float> llama_cpp(size_t(T * cfg.vocab));
  in.read(reinterpret_cast<char*>(llama_cpp.data()), std::streamsize(llama_cpp.size() * 4));
  ASSERT_TRUE(in) << "cannot read llama.cpp logits";
  const double err = rel_err(m.logits(), llama_cpp);
  std::printf("llama.cpp logits: max abs diff / max abs = %.2e\n", err);
  EXPECT_LE(err, 1e-5);
}
