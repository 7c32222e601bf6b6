#pragma once
// Converting a llama GGUF to other weight types (`ggtrain export`): every
// metadata key is kept (tokenizer, names, run info), the weights are
// rewritten as F32/F16/BF16 with norm weights left F32, as llama.cpp's own
// converter does, or quantized as llama.cpp's quantizer does.
#include <string>

#include "convert/quantize.h"
#include "gguf/types.h"
#include "quant/recipe.h"

namespace ggtrain::convert {

void export_model(const std::string& in_path, const std::string& out_path, gguf::TensorType type);

// BASE + LoRA adapter (at user_scale, as llama.cpp's --lora-scale) merged
// into a standard model: W + scale * B A summed in double; all metadata of
// the base kept, but the adapter's chat template and end-of-turn id (a chat
// adapter's) replace the base's; weights written as `type`.
void merge_lora_model(const std::string& base_path, const std::string& adapter_path, double user_scale,
                      const std::string& out_path, gguf::TensorType type);

// The same two as a llama.cpp quantized file type (q4_k_m, q8_0, ...),
// byte-identical to llama.cpp's llama_model_quantize output (convert/quantize.h).
QuantizeReport export_quantized(const std::string& in_path, const std::string& out_path, quant::FileType ft);
QuantizeReport merge_lora_quantized(const std::string& base_path, const std::string& adapter_path, double user_scale,
                                    const std::string& out_path, quant::FileType ft);

}  // namespace ggtrain::convert
