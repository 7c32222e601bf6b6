#include "train/run_variant.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/checkpoint.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/vocab_growth.h"
#include "quant/gguf_floats.h"
#include "train/run_checkpoint.h"
#include "util/error.h"

namespace ggtrain::train {

using gguf::Value;

namespace {

void load_exact_params(const gguf::GgufFile& w, const model::ParamLayout& layout, float* params) {
  for (const auto& t : layout.tensors())
    if (w.tensor(t.name).type != gguf::TensorType::F32)
      fail("{}: tensor '{}' is not F32; cannot resume exactly from it", w.path(), t.name);
  model::load_model_params(w, layout, params);
}

// A tensor of the state or weights file copied into its place in params.
void copy_f32_tensor(const gguf::GgufFile& f, const model::ParamTensor& t, float* params) {
  const auto& ti = f.tensor(t.name);
  if (ti.type != gguf::TensorType::F32 || ti.shape() != model::ggml_ne(t.shape))
    fail("{}: tensor '{}' has the wrong type or shape", f.path(), t.name);
  std::memcpy(params + t.offset, ti.data, size_t(t.size) * 4);
}

class FromScratch : public RunVariant {
 public:
  void init(model::Transformer<float>& m, const model::Config& mc, int64_t, uint64_t seed, bool) override {
    model::init_params(mc, m.layout(), m.params(), seed);
  }
};

// init.from's weights (dequantized to F32) into the model: at the base's
// vocabulary, then carried over with the added markers' rows at the mean
// embedding when the run's vocabulary grew.
void load_base(const gguf::GgufFile& base, model::Transformer<float>& m, const model::Config& mc,
               int64_t added_tokens) {
  const int64_t base_vocab = mc.vocab - added_tokens;
  if (base.get_uint_or(mc.key("vocab_size"), uint64_t(base_vocab)) != uint64_t(base_vocab))
    fail("{}: the model's vocabulary differs from its tokenizer's {} tokens (init.from)", base.path(), base_vocab);
  if (added_tokens == 0) {
    model::load_base_params(base, mc, m.layout(), m.params());
    return;
  }
  if (mc.nextn_tensors)
    for (const auto& t : *mc.nextn_tensors)
      if (std::find(t.ne.begin(), t.ne.end(), uint64_t(base_vocab)) != t.ne.end())
        fail("{}: the multi-token-prediction block's '{}' has a row per token, and a grown vocabulary would leave it "
             "a size llama.cpp refuses; train without the added markers, or convert the model without its "
             "prediction block (--no-mtp)",
             base.path(), t.name);
  model::Config base_cfg = mc;
  base_cfg.vocab = base_vocab;
  const model::ParamLayout base_layout(base_cfg);
  std::vector<float> base_params(size_t(base_layout.total()));
  model::load_base_params(base, base_cfg, base_layout, base_params.data());
  model::grow_vocabulary(base_layout, base_params.data(), base_vocab, m.layout(), m.params());
}

class Continued : public RunVariant {
 public:
  explicit Continued(const gguf::GgufFile& base) : base_(base) {}
  void init(model::Transformer<float>& m, const model::Config& mc, int64_t added_tokens, uint64_t,
            bool quiet) override {
    load_base(base_, m, mc, added_tokens);
    if (!quiet)
      fmt::print(stderr, "continuing {}: {} parameters as F32 master weights, fresh AdamW state\n", base_.path(),
                 m.layout().total());
  }
  uint64_t base_fingerprint() const override { return model::base_fingerprint(base_); }

 private:
  const gguf::GgufFile& base_;
};

class LoraOnBase : public RunVariant {
 public:
  LoraOnBase(const gguf::GgufFile& base, TrainSection::Lora lora) : base_(base), lora_(std::move(lora)) {}

  void shape(model::Config& mc, const tokenizer::Tokenizer&, bool) override {
    mc.lora = {lora_.rank, lora_.alpha, lora_.targets};
  }
  // The base's quantized matrices stay as they are in the file (they are
  // frozen), and in a bf16 run its float matrices are held in bf16 (no
  // float copy): the model reads them through `opts`.
  void hold(const model::Config& mc, model::ModelOptions& opts, bool quiet) override {
    const bool bf16 = opts.precision == model::Precision::kBf16;
    quantized_ = std::make_unique<model::QuantizedBase>(base_, mc, bf16);
    opts.quantized = quantized_.get();
    if (!quiet && !quantized_->names().empty())
      fmt::print(stderr, "base: {} matrices {} ({:.1f} MiB)\n", quantized_->names().size(),
                 bf16 ? "held quantized or in bf16" : "stay quantized", double(quantized_->bytes()) / (1 << 20));
  }
  void bind(model::Transformer<float>&) override { checksum_ = model::base_fingerprint(base_); }
  void init(model::Transformer<float>& m, const model::Config& mc, int64_t added_tokens, uint64_t seed,
            bool quiet) override {
    load_base(base_, m, mc, added_tokens);
    model::init_lora(m.layout(), m.params(), seed);
    if (!quiet)
      fmt::print(stderr, "continuing {}: {} parameters as F32 weights, fresh AdamW state\n", base_.path(),
                 m.layout().total());
  }
  // An adapter: llama.cpp takes the vocabulary from the base; a chat run's
  // template goes along for whoever serves it.
  std::vector<float> add_weights(gguf::GgufWriter& w, const CheckpointData& d) const override {
    model::add_lora_adapter(w, *d.config, *d.layout, d.params, base_.path());
    return {};
  }
  void add_tokenizer(gguf::GgufWriter& w, const tokenizer::Tokenizer& tok) const override { tok.add_chat_keys(w); }
  void write_state(gguf::GgufWriter& w, const CheckpointData&) const override {
    w.set("ggtrain.lora.base.path", Value::str(base_.path()));
    w.set("ggtrain.lora.base.checksum", Value::u64(checksum_));
  }
  // The base from init.from (its tensors must still have the fingerprint
  // the state file recorded), the adapter tensors from the weights file.
  void load(const gguf::GgufFile& w, const gguf::GgufFile& s, const CheckpointData& d) const override {
    if (s.get_uint("ggtrain.lora.base.checksum") != checksum_)
      fail("{}: the base model {} differs from the one this LoRA run was trained on ({}); resume with the "
           "same init.from file",
           s.path(), base_.path(), s.get_string("ggtrain.lora.base.path"));
    model::load_base_params(base_, *d.config, *d.layout, d.params);
    for (const auto& t : d.layout->tensors())
      if (t.name.find(".lora_") != std::string::npos) copy_f32_tensor(w, t, d.params);
  }
  const model::QuantizedBase* held() const override { return quantized_.get(); }
  uint64_t base_fingerprint() const override { return checksum_; }

 private:
  const gguf::GgufFile& base_;
  const TrainSection::Lora lora_;
  std::unique_ptr<model::QuantizedBase> quantized_;  // base_'s quantized matrices
  uint64_t checksum_ = 0;  // model::base_fingerprint(base_)
};

class DonorLens : public RunVariant {
 public:
  explicit DonorLens(const std::string& path) {
    try {
      donor_ = model::load_donor_table(path);
    } catch (const Error& e) {
      fail("{} (init.donor)", e.what());
    }
  }
  // The donor's vocabulary is the run's (the tokenizer came from the same
  // file); its table is input only, so the new head is trained untied.
  void shape(model::Config& mc, const tokenizer::Tokenizer& tok, bool quiet) override {
    if (donor_.vocab != tok.vocab_size())
      fail("{}: token_embd.weight has {} rows but the donor's vocabulary has {} tokens", donor_.path, donor_.vocab,
           tok.vocab_size());
    mc.tied = false;
    mc.donor_dim = donor_.dim;
    if (!quiet)
      fmt::print(stderr, "warm start from {}: frozen embedding [{}, {}], trainable lens.proj [{}, {}], untied head\n",
                 donor_.path, donor_.vocab, donor_.dim, mc.d_model, donor_.dim);
  }
  void bind(model::Transformer<float>& m) override {
    std::copy(donor_.table.begin(), donor_.table.end(), m.donor_table());
  }
  void init(model::Transformer<float>& m, const model::Config& mc, int64_t, uint64_t seed, bool) override {
    model::init_params(mc, m.layout(), m.params(), seed);
    model::init_lens(donor_, m.layout(), m.params(), seed);
  }
  // The weights file holds the folded model (a standard one).
  std::vector<float> add_weights(gguf::GgufWriter& w, const CheckpointData& d) const override {
    model::FoldedModel folded = model::fold_donor_model(*d.config, *d.layout, d.params, donor_.table.data());
    model::add_model_tensors(w, folded.config, model::ParamLayout(folded.config), folded.params.data());
    return std::move(folded.params);  // moved, not copied: `w` still points into it
  }
  // The lens itself, and the donor the run must resume with.
  void write_state(gguf::GgufWriter& w, const CheckpointData& d) const override {
    w.set("ggtrain.donor.path", Value::str(donor_.path));
    w.set("ggtrain.donor.checksum", Value::u64(donor_.checksum));
    const auto& lens = d.layout->get("lens.proj.weight");
    quant::add_float_tensor(w, lens.name, gguf::TensorType::F32, model::ggml_ne(lens.shape), d.params + lens.offset);
  }
  // Every tensor but token_embd from the folded weights file, the lens from
  // the state file; the donor table must still be the one the run started
  // with.
  void load(const gguf::GgufFile& w, const gguf::GgufFile& s, const CheckpointData& d) const override {
    if (s.get_uint("ggtrain.donor.checksum") != donor_.checksum)
      fail("{}: the donor table of {} differs from the one this run was trained with ({}); resume "
           "with the same donor file",
           s.path(), donor_.path, s.get_string("ggtrain.donor.path"));
    model::Config std_cfg = *d.config;
    std_cfg.donor_dim = 0;
    const model::ParamLayout std_layout(std_cfg);
    std::vector<float> folded(size_t(std_layout.total()));
    load_exact_params(w, std_layout, folded.data());
    for (const auto& t : d.layout->tensors()) {
      if (t.name == "lens.proj.weight") {
        copy_f32_tensor(s, t, d.params);
      } else {
        const auto& src = std_layout.get(t.name);
        std::memcpy(d.params + t.offset, folded.data() + src.offset, size_t(t.size) * 4);
      }
    }
  }
  std::optional<model::FoldedModel> fold(const model::Config& mc, const model::ParamLayout& layout,
                                         const float* params) const override {
    return model::fold_donor_model(mc, layout, params, donor_.table.data());
  }

 private:
  model::DonorTable donor_;
};

}  // namespace

std::unique_ptr<RunVariant> RunVariant::choose(const RunConfig& c, const gguf::GgufFile* base) {
  if (!c.init.donor.empty()) return std::make_unique<DonorLens>(c.init.donor);
  if (!base) return std::make_unique<FromScratch>();
  if (c.train.lora.rank > 0) return std::make_unique<LoraOnBase>(*base, c.train.lora);
  return std::make_unique<Continued>(*base);
}

std::vector<float> RunVariant::add_weights(gguf::GgufWriter& w, const CheckpointData& d) const {
  model::add_model_tensors(w, *d.config, *d.layout, d.params);
  return {};
}

void RunVariant::load(const gguf::GgufFile& w, const gguf::GgufFile&, const CheckpointData& d) const {
  load_exact_params(w, *d.layout, d.params);
}

uint64_t RunVariant::base_fingerprint() const {
  fail("a reference model needs a base: set init.from (the model the preference run starts from)");
}

}  // namespace ggtrain::train
