#pragma once
// Where each parameter lives inside one contiguous buffer. The same layout
// serves parameters, gradients and both AdamW moments, and it is exactly the
// llama.cpp tensor set, so a checkpoint writes these ranges out unchanged.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace ggtrain::model {

struct ParamTensor {
  std::string name;            // llama.cpp name, e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> shape;  // row-major [out, in] (ggml ne is the reverse)
  int64_t offset = 0;          // in elements from the buffer start
  int64_t size = 0;
  bool decay = false;          // AdamW weight decay: 2-D matrices only
};

class ParamLayout {
 public:
  explicit ParamLayout(const LlamaConfig& c);
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  int64_t total() const { return total_; }
  const ParamTensor& get(const std::string& name) const;  // throws if absent
  const ParamTensor* find(const std::string& name) const;

 private:
  void add(const std::string& name, std::vector<int64_t> shape);
  std::vector<ParamTensor> tensors_;
  int64_t total_ = 0;
};

// Typed pointers into a buffer laid out by ParamLayout (parameters or grads).
template <typename T>
struct LayerWeights {
  T *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
};

template <typename T>
struct ModelWeights {
  T* token_embd;  // null with a donor table (LlamaConfig::donor_dim > 0)
  T* lens;        // lens.proj.weight [d_model, donor_dim], or null
  std::vector<LayerWeights<T>> layers;
  T* output_norm;
  T* output;  // == token_embd when tied

  static ModelWeights bind(const ParamLayout& layout, const LlamaConfig& c, T* base);
};

}  // namespace ggtrain::model
