// train/qat on a LoRA run: what is quantized is the merged matrix
// W + s B A, as `export --merge-lora --type` stores it, and the base's
// place holds W' = Q(W + s B A) - s B A, so the forward's W' x + s B (A x)
// is the merged quantized matrix's product. Checked against the export
// itself (read back and dequantized): W' + s B A, summed here in double,
// is the export's value within half a float ulp of W' (the one rounding of
// W'); the matrices without an adapter are the export's bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "convert/export.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/lora.h"
#include "model/params.h"
#include "quant/gguf_floats.h"
#include "quant/recipe.h"
#include "support/family_shapes.h"
#include "support/random_model.h"
#include "support/run_helpers.h"
#include "support/temp_dir.h"
#include "train/qat.h"
#include "train/run_checkpoint.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

struct Agreement {
  int exact = 0;  // tensors without an adapter equal to the export's bit for bit
  int adapted = 0;  // tensors with one
  double worst_ulps = 0;  // max |W' + s B A - export| / ulp(W') over the adapted
  std::vector<std::string> differ;  // tensors without an adapter that differ
};

// s B A's row o, summed in double by k (an independent loop, not
// model::lora_row_delta).
double delta_at(const std::vector<float>& w, const model::ParamTensor& a, const model::ParamTensor& b, int64_t e,
                int64_t o, int64_t i, double s) {
  const size_t d = a.shape.size();
  const int64_t rank = a.shape[d - 2], in = a.shape[d - 1], out = b.shape[d - 2];
  double sum = 0;
  for (int64_t k = 0; k < rank; ++k)
    sum += double(w[size_t(b.offset + e * out * rank + o * rank + k)]) *
           double(w[size_t(a.offset + e * rank * in + k * in + i)]);
  return s * sum;
}

// `qat`: the weights in place during a QAT step; `masters`: the run's
// weights (its adapters are read from them).
Agreement agreement(const std::string& exported, const model::Config& c, const model::ParamLayout& layout,
                    const std::vector<float>& qat, const std::vector<float>& masters) {
  const double s = c.lora.alpha / double(c.lora.rank);
  gguf::GgufFile f(exported);
  Agreement r;
  for (const auto& t : f.tensors()) {
    const model::ParamTensor* p = layout.find(t.name);
    if (!p) continue;
    const auto v = quant::tensor_floats(f, t);
    const model::ParamTensor* a = layout.find(t.name + ".lora_a");
    if (!a) {
      if (std::memcmp(v.data(), qat.data() + p->offset, v.size() * sizeof(float)) == 0) ++r.exact;
      else r.differ.push_back(t.name);
      continue;
    }
    ++r.adapted;
    const model::ParamTensor& b = layout.get(t.name + ".lora_b");
    const size_t d = a->shape.size();
    const int64_t in = a->shape[d - 1], out = b.shape[d - 2];
    for (int64_t j = 0; j < p->size; ++j) {
      const int64_t row = j / in, i = j % in;
      const float wq = qat[size_t(p->offset + j)];
      const double err = std::fabs(double(wq) + delta_at(masters, *a, b, row / out, row % out, i, s) - double(v[j]));
      const float ulp = std::nextafter(std::fabs(wq), std::numeric_limits<float>::infinity()) - std::fabs(wq);
      r.worst_ulps = std::max(r.worst_ulps, std::isfinite(err) ? err / double(ulp) : 1e30);
    }
  }
  return r;
}

// A random base of `c`'s architecture in `base`, and the run's weights: the
// base's, then adapters with A and B both away from zero.
std::vector<float> lora_weights(const model::Config& c, const model::ParamLayout& layout, const std::string& base) {
  const auto base_w = test_support::write_random_model(c.without_lora(), base);
  std::vector<float> w(size_t(layout.total()));
  std::copy(base_w.begin(), base_w.end(), w.begin());  // the adapters come last
  for (const auto& t : layout.tensors())
    if (t.name.ends_with(".lora_a") || t.name.ends_with(".lora_b"))
      for (int64_t i = 0; i < t.size; ++i)
        w[size_t(t.offset + i)] = float(0.08 * std::sin(double(i) * 0.61 + double(t.offset % 89)));
  return w;
}

}  // namespace

// A dense llama with rows of 256 (K-quants) and adapters on all seven
// matrices, and a Qwen3.5-MoE hybrid (Gated DeltaNet and attention layers,
// experts stacked, rows of 64: the recipe's fallbacks) with adapters on
// attention, the DeltaNet output and the experts.
TEST(QatLora, ForwardWeightsAreTheMergedExportsBlocks) {
  TempDir tmp;
  for (const std::string arch : {"llama", "qwen35moe"}) {
    auto c = test_support::small_model_config(false, 2);
    c.arch = arch;
    if (arch == "llama") {
      c.d_model = 256;
      c.d_ff = 512;
      c.lora = {4, 8.0, {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}};
    } else {
      test_support::shape_family_layers(c);
      c.lora = {4, 8.0, {"attn_q", "ssm_out", "ffn_up_exps", "ffn_down_exps"}};
    }
    const model::ParamLayout layout(c);
    const std::string base = tmp / (arch + ".gguf"), adapter = tmp / (arch + "-adapter.gguf");
    const auto masters = lora_weights(c, layout, base);
    gguf::GgufWriter aw;
    model::add_lora_adapter(aw, c, layout, masters.data());
    aw.write(adapter);
    for (const char* type : {"q4_k_m", "q4_0"}) {
      SCOPED_TRACE(arch + " " + type);
      const auto ft = *quant::quantized_file_type(type);
      const std::string out = tmp / (arch + "-" + type + ".gguf");
      convert::merge_lora_quantized(base, adapter, 1.0, out, ft);
      train::QatWeights qat(ft, c, layout);
      auto w = masters;
      qat.quantize(w.data());
      const Agreement a = agreement(out, c, layout, w, masters);
      EXPECT_GT(a.adapted, 0);
      EXPECT_GT(a.exact, 0);
      EXPECT_TRUE(a.differ.empty()) << "first differing tensor without an adapter: " << a.differ[0];
      // One rounding: W' = float(Q - s B A) is within half an ulp.
      EXPECT_LE(a.worst_ulps, 0.5);
      RecordProperty(arch + "_" + type + "_worst_ulps", std::to_string(a.worst_ulps));
      qat.restore(w.data());
      EXPECT_EQ(std::memcmp(w.data(), masters.data(), w.size() * sizeof(float)), 0) << "masters restored";
      // Control: quantizing W alone, as a QAT that ignored the adapter would.
      const model::Config plain = c.without_lora();
      const model::ParamLayout plain_layout(plain);
      train::QatWeights w_only(ft, plain, plain_layout);
      auto v = masters;
      w_only.quantize(v.data());
      const double control = agreement(out, c, layout, v, masters).worst_ulps;
      EXPECT_GT(control, 1000.0);
      RecordProperty(arch + "_" + type + "_control_ulps", std::to_string(control));
    }
  }
}

// A QAT LoRA run resumes exactly; its first loss is the quantized base's
// (B starts at zero), not the float base's; and `export --merge-lora
// --type q4_0` of its last adapter stores the blocks its QAT weights are
// built from.
TEST(QatLora, RunResumesExactlyAndMergedExportIsItsBlocks) {
  TempDir tmp;
  const std::string base = test_support::tiny_base_model(tmp.path().string());
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 4);
  c.init.from = base;
  c.train.lora.rank = 2;
  c.train.lora.targets = {"attn_q", "attn_v", "ffn_down"};
  c.train.qat = "q4_0";
  c.checkpoint.every = 2;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 2);
  EXPECT_NE(test_support::first_loss_without_qat(tmp / "plain", c),
            test_support::step_record(tmp / "a", 1)["loss"].get<double>());

  const std::string adapter = train::weights_path(tmp / "a", 4), out = tmp / "merged-q4_0.gguf";
  convert::merge_lora_quantized(base, adapter, 1.0, out, quant::FileType::Q4_0);
  const gguf::GgufFile bf(base), af(adapter);
  model::Config mc = model::config_from_gguf(bf);
  mc.lora = {2, c.train.lora.alpha, c.train.lora.targets};
  const model::ParamLayout layout(mc);
  std::vector<float> masters(size_t(layout.total()));
  model::load_model_params(bf, model::ParamLayout(mc.without_lora()), masters.data());
  for (const auto& t : layout.tensors())
    if (t.name.find(".lora_") != std::string::npos) {
      const auto v = quant::tensor_floats(af, af.tensor(t.name));
      std::copy(v.begin(), v.end(), masters.begin() + t.offset);
    }
  train::QatWeights qat(quant::FileType::Q4_0, mc, layout);
  auto w = masters;
  qat.quantize(w.data());
  const Agreement a = agreement(out, mc, layout, w, masters);
  EXPECT_EQ(a.adapted, 3 * int(mc.n_layers));
  EXPECT_TRUE(a.differ.empty()) << a.differ[0];
  EXPECT_LE(a.worst_ulps, 0.5);
}
