#pragma once
// The training variants: what makes the model a run trains differ from the
// plain model its checkpoints are read as. A run has exactly one, chosen
// from its config, and asks it at each point where they differ (layout,
// init, save, load, fold for inference):
//   from scratch  random weights.
//   continued     init.from, a full finetune; a vocabulary grown by chat
//                 markers the base lacks gets new rows at the mean row.
//   LoRA          init.from with train.lora: the base frozen and held as it
//                 is in its file (quantized matrices stay quantized), the
//                 adapter trained; the weights file is the adapter.
//   donor lens    init.donor: the donor's embedding frozen behind a
//                 trainable lens.proj, folded into token_embd in every
//                 weights file and for inference.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/donor.h"
#include "model/quantized_base.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "train/run_config.h"

namespace ggtrain::train {

struct CheckpointData;

class RunVariant {
 public:
  // `base`: init.from's file, or null; it outlives the variant. A donor's
  // table is read here (before the run's tokenizer: a donor that is no model
  // is named first).
  static std::unique_ptr<RunVariant> choose(const RunConfig& c, const gguf::GgufFile* base);
  virtual ~RunVariant() = default;

  // Layout: the config trained, from the plain one of the run's vocabulary.
  virtual void shape(model::Config& /*mc*/, const tokenizer::Tokenizer& /*tok*/, bool /*quiet*/) {}
  // What the model reads from outside its parameters.
  virtual void hold(const model::Config& /*mc*/, model::ModelOptions& /*opts*/, bool /*quiet*/) {}
  // Once the model is built: what it is given besides its parameters.
  virtual void bind(model::Transformer<float>& /*m*/) {}
  // Init: a fresh run's parameters. `added_tokens`: chat markers appended to
  // the base's vocabulary.
  virtual void init(model::Transformer<float>& m, const model::Config& mc, int64_t added_tokens, uint64_t seed,
                    bool quiet) = 0;
  // Save (train/run_checkpoint.cpp writes the files): what the weights file
  // holds, the model's keys and tensors (returned: floats `w` points into
  // until it is written, when they are not d.params); its tokenizer keys;
  // the state file's own keys and tensors.
  virtual std::vector<float> add_weights(gguf::GgufWriter& w, const CheckpointData& d) const;
  virtual void add_tokenizer(gguf::GgufWriter& w, const tokenizer::Tokenizer& tok) const { tok.add_to_gguf(w); }
  virtual void write_state(gguf::GgufWriter& /*w*/, const CheckpointData& /*d*/) const {}
  // Load: a checkpoint's parameters back into d.params (resume).
  virtual void load(const gguf::GgufFile& weights, const gguf::GgufFile& state, const CheckpointData& d) const;
  // Fold: the plain model inference runs, when the parameters are not one.
  virtual std::optional<model::FoldedModel> fold(const model::Config& /*mc*/, const model::ParamLayout& /*layout*/,
                                                 const float* /*params*/) const {
    return std::nullopt;
  }
  // The base's quantized matrices, for a decoder over the parameters.
  virtual const model::QuantizedBase* held() const { return nullptr; }
  // model::base_fingerprint of init.from (a preference reference's model).
  virtual uint64_t base_fingerprint() const;
};

}  // namespace ggtrain::train
