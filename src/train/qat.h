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
// of those weights uses.
#include <cstdint>
#include <vector>

#include "gguf/types.h"
#include "model/config.h"
#include "model/params.h"
#include "quant/recipe.h"

namespace ggtrain::train {

class QatWeights {
 public:
  // `layout`: the model's full parameter layout (a whole model, not LoRA).
  QatWeights(quant::FileType ft, const model::Config& c, const model::ParamLayout& layout);
  // Keeps the masters of the tensors the recipe quantizes and replaces them
  // in `params` by their quantized-dequantized values (all threads).
  void quantize(float* params);
  // Puts the masters back.
  void restore(float* params);
  int64_t quantized_tensors() const { return int64_t(tensors_.size()); }
  double last_seconds() const { return last_seconds_; }  // the last quantize()

 private:
  struct Tensor {
    int64_t offset, rows, cols;
    gguf::TensorType type;
  };
  std::vector<Tensor> tensors_;
  std::vector<float> masters_;  // their values before quantize(), one after another
  double last_seconds_ = 0;
};

}  // namespace ggtrain::train
