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
#include <cstdint>
#include <string>
#include <vector>

#include "convert/quantize.h"
#include "gguf/types.h"
#include "model/config.h"
#include "model/params.h"
#include "quant/recipe.h"

namespace ggtrain::train {

class QatWeights {
 public:
  // `layout`: the run's parameter layout (a whole model, or a LoRA run's
  // adapters beside the base matrices it keeps in float). It must outlive
  // this object.
  QatWeights(quant::FileType ft, const model::Config& c, const model::ParamLayout& layout,
             const convert::ImatrixInput* imatrix = nullptr);
  // Keeps the masters of the tensors the recipe quantizes and replaces them
  // in `params` by their quantized-dequantized values (all threads). Nothing
  // when they are quantized already (a decoder run inside a step).
  void quantize(float* params);
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
  };
  const model::Config config_;
  const model::ParamLayout& layout_;
  std::vector<Tensor> tensors_;
  std::vector<float> masters_;  // their values before quantize(), one after another
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
