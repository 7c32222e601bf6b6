#pragma once
// Converting a model GGUF to other weight types (`ggtrain export`): every
// metadata key is kept (tokenizer, names, run info), and the file is what
// llama.cpp's llama_model_quantize writes for that file type: weights
// converted to F32/F16/BF16 (norms and other 1-D tensors left as they are),
// or quantized with its per-tensor mix.
#include <string>

#include "convert/quantize.h"
#include "gguf/types.h"
#include "quant/recipe.h"

namespace ggtrain::convert {

// IN as F32, F16, BF16 or Q8_0 weights: llama_model_quantize's file type of that name.
void export_model(const std::string& in_path, const std::string& out_path, gguf::TensorType type);

// BASE + LoRA adapter (at user_scale, as llama.cpp's --lora-scale) merged
// into a standard model: W + scale * B A summed in double; all metadata of
// the base kept, but the adapter's chat template and end-of-turn id (a chat
// adapter's) replace the base's; weights written as `type`.
void merge_lora_model(const std::string& base_path, const std::string& adapter_path, double user_scale,
                      const std::string& out_path, gguf::TensorType type);

// The same two as a llama.cpp quantized file type (q4_k_m, q8_0, ...),
// byte-identical to llama.cpp's llama_model_quantize output (convert/quantize.h).
// imatrix (optional): quantized against it, as llama-quantize --imatrix.
QuantizeReport export_quantized(const std::string& in_path, const std::string& out_path, quant::FileType ft,
                                const ImatrixInput* imatrix = nullptr);
QuantizeReport merge_lora_quantized(const std::string& base_path, const std::string& adapter_path, double user_scale,
                                    const std::string& out_path, quant::FileType ft,
                                    const ImatrixInput* imatrix = nullptr);

}  // namespace ggtrain::convert
