#pragma once
// A LoRA run's frozen base, read from its GGUF: the quantized matrices
// (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) stay in their blocks (Q8_0: 34
// bytes per 32 weights, Q4_K: 144 per 256, instead of 4 bytes a weight as
// F32 master weights), pointing into the file's memory map as llama.cpp's
// loader does; every other base tensor (norms, F32/F16/BF16 matrices)
// becomes float parameters. A bf16 run also holds the F32/F16/BF16 matrices,
// in bf16: BF16 ones in the file's memory map, the others rounded once into
// memory of their own; only norms (and what a grown vocabulary reshapes)
// become float parameters.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/types.h"
#include "kernels/bf16.h"
#include "kernels/quant_linear.h"
#include "model/config.h"
#include "model/params.h"

namespace ggtrain::model {

// One held matrix: its GGUF type (the decoder reads it as a file's) and its
// rows as the training layers read them.
struct HeldMatrix {
  gguf::TensorType type;
  kernels::QuantRows rows;  // a stack of experts' matrices: all of them, expert after expert
  // Expert e's matrix of a stack of experts' matrices of `out` rows each.
  kernels::QuantRows expert(int64_t e, int64_t out) const {
    return {rows.data + e * out * rows.row_bytes, out, rows.cols, rows.row_bytes, rows.dequantize, rows.bf16};
  }
};

class QuantizedBase {
 public:
  QuantizedBase() = default;
  // The quantized matrices of `f` among the base tensors of `c` (LoRA
  // tensors aside), and the experts' stacks of them, shapes and sizes
  // checked against the model's. `f` must outlive this.
  QuantizedBase(const gguf::GgufFile& f, const Config& c, bool floats_in_bf16 = false);
  const HeldMatrix* find(const std::string& name) const;
  const std::set<std::string>& names() const { return names_; }
  int64_t bytes() const { return bytes_; }

 private:
  void hold(const std::string& name, gguf::TensorType type, const kernels::QuantRows& rows, int64_t bytes);
  // F32 or F16 matrices `f` has with the model's shape, held as bf16 rows.
  void hold_in_bf16(const gguf::GgufFile& f, const ParamTensor& t, const gguf::TensorInfo& ti);

  std::map<std::string, HeldMatrix> held_;
  std::vector<std::shared_ptr<std::vector<kernels::bf16>>> rounded_;  // F32/F16 matrices' bf16 rows
  std::set<std::string> names_;
  int64_t bytes_ = 0;
};

// Fills the base tensors that `layout` (the model's parameters: the base
// but what a QuantizedBase holds, then the LoRA tensors) has from `f`,
// dequantized to F32; the LoRA tensors are left alone.
void load_base_params(const gguf::GgufFile& f, const Config& c, const ParamLayout& layout, float* params);

// FNV-1a of every tensor's name, type and stored bytes: a resumed LoRA run
// must find the same base, held the same way.
uint64_t base_fingerprint(const gguf::GgufFile& f);

}  // namespace ggtrain::model
