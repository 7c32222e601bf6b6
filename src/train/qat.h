#pragma once
// Quantization-aware training (train.qat = "q4_k_m", or any file type
// `export` writes): each step's forward and backward see every weight as
// `export --type` will store it, quantized and dequantized with that file
// type's per-tensor recipe and ggml's quantizers (quant/recipe.h,
// quant/type_traits.h: the bytes llama-quantize writes), and the gradient
// they give is applied to the float master weights as it is (a
// straight-through estimator). What the recipe keeps in float (norms, and
// the tensors llama.cpp does not quantize) stays float. The checkpoint keeps
// the masters; `export --type` of it gives exactly the blocks a forward
// of those weights uses. In a LoRA run the matrix quantized is the merged
// W + s B A (qat.cpp says how the forward uses it). With an importance
// matrix (train.qat_imatrix) each matrix with an entry is quantized against
// it, as `export --type T --imatrix FILE` will.
//
// With train.qat_every = K the trainer asks for new blocks every K steps
// (quantizing a K-quant costs as much as a step at real shapes); the steps
// between use the masters plus the rounding errors of the last blocks
// (Q(W_k) - W_k), so the forward still moves with every update. A
// checkpoint's state file carries those errors ("qat.error.<tensor>", F32),
// so a resumed run uses the ones the uninterrupted run would.
#include <cstdint>
#include <string>
#include <vector>

#include "convert/quantize.h"
#include "gguf/reader.h"
#include "gguf/types.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/params.h"
#include "quant/recipe.h"

namespace ggtrain::train {

class QatWeights {
 public:
  // `layout`: the run's parameter layout (a whole model, or a LoRA run's
  // adapters beside the base matrices it keeps in float). It must outlive
  // this object.
  QatWeights(quant::FileType ft, const model::Config& c, const model::ParamLayout& layout,
             const convert::ImatrixInput* imatrix = nullptr, int64_t every = 1);
  // Keeps the masters of the tensors the recipe quantizes and replaces them
  // in `params` (all threads): by their blocks' values when
  // requantize_next() asked or there are none yet, else by the masters plus
  // the last blocks' rounding errors. Nothing when they are in place already
  // (a decoder run inside a step).
  void quantize(float* params);
  // The next quantize() makes new blocks of the masters.
  void requantize_next() { requantize_ = true; }
  bool due(int64_t step) const { return step % every_ == 0; }  // new blocks before step `step` (0-based)
  // The rounding errors as state-file tensors (every > 1; `w` reads them at
  // write()), and back from a state file (one without them: new blocks at
  // the next step). Errors name the file and the tensor.
  void add_errors(gguf::GgufWriter& w) const;
  void load_errors(const gguf::GgufFile& state);
  // Puts the masters back (nothing when they are in place).
  void restore(float* params);
  bool active() const { return active_; }
  int64_t quantized_tensors() const { return int64_t(tensors_.size()); }
  double last_seconds() const { return last_seconds_; }  // the last quantize()

 private:
  struct Tensor {
    std::string name;
    int64_t offset, rows, cols;
    gguf::TensorType type;
    // Its importance values, a row per expert slice of rows_per_slice rows
    // (empty: quantized without).
    std::vector<float> importance;
    int64_t rows_per_slice;
    std::vector<uint64_t> ne;  // ggml's shape
    int64_t at;  // where its values start in masters_ and errors_
    size_t row_bytes;
  };
  void add_last_errors(const Tensor& t, float* w) const;
  void quantize_tensor(const Tensor& t, float* w, const model::LoraPair* pair, double scale);

  const model::Config config_;
  const model::ParamLayout& layout_;
  std::string type_, imatrix_;  // train.qat's type name, train.qat_imatrix's path
  std::vector<Tensor> tensors_;
  std::vector<float> masters_;  // their values before quantize(), one after another
  std::vector<float> errors_;  // every > 1: the last blocks' values minus the (merged) masters they rounded
  int64_t every_ = 1;
  bool requantize_ = true;  // no blocks made yet, or they are due
  double last_seconds_ = 0;
  bool active_ = false;  // params hold the quantized values
};

// The weights quantized for the scope's lifetime, masters back at its end
// (an exception included); nothing for a null QatWeights, and nothing when
// an outer scope quantized them already.
class QuantizedScope {
 public:
  QuantizedScope(QatWeights* qat, float* params) : qat_(qat && !qat->active() ? qat : nullptr), params_(params) {
    if (qat_) qat_->quantize(params_);
  }
  ~QuantizedScope() {
    if (qat_) qat_->restore(params_);
  }
  QuantizedScope(const QuantizedScope&) = delete;
  QuantizedScope& operator=(const QuantizedScope&) = delete;

 private:
  QatWeights* qat_;
  float* params_;
};

}  // namespace ggtrain::train
