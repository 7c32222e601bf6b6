#pragma once
// A LoRA run's frozen base, read from its GGUF: the Q8_0 matrices stay Q8_0
// (34 bytes per 32 weights instead of 128 as F32 master weights), pointing
// into the file's memory map as llama.cpp's loader does; every other base
// tensor (norms, F32/F16/BF16 matrices) becomes float parameters.
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "gguf/reader.h"
#include "kernels/q8_linear.h"
#include "model/config.h"
#include "model/params.h"

namespace ggtrain::model {

class QuantizedBase {
 public:
  QuantizedBase() = default;
  // The 2-D Q8_0 tensors of `f` among the base tensors of `c` (LoRA tensors
  // aside), shapes checked against the model's. `f` must outlive this.
  QuantizedBase(const gguf::GgufFile& f, const LlamaConfig& c);
  const kernels::Q8Rows* find(const std::string& name) const;
  const std::set<std::string>& names() const { return names_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::map<std::string, kernels::Q8Rows> rows_;
  std::set<std::string> names_;
  int64_t bytes_ = 0;
};

// Fills the base tensors that `layout` (the model's parameters: the base
// but what a QuantizedBase holds, then the LoRA tensors) has from `f`,
// dequantized to F32; the LoRA tensors are left alone.
void load_base_params(const gguf::GgufFile& f, const LlamaConfig& c, const ParamLayout& layout, float* params);

// FNV-1a of every tensor's name, type and stored bytes: a resumed LoRA run
// must find the same base, held the same way.
uint64_t base_fingerprint(const gguf::GgufFile& f);

}  // namespace ggtrain::model
