#include "quant/blocks.h"

#include "kernels/number_formats.h"
#include "util/error.h"

namespace ggtrain::quant {

using gguf::TensorType;

bool has_block_codec(TensorType t) {
  switch (t) {
    case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q5_1:
    case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K:
      return true;
    default:
      return false;
  }
}

void quantize_blocks(TensorType t, const float* x, uint8_t* out, size_t n) {
  if (n % gguf::traits(t).block_size != 0)
    fail("{} needs a multiple of {} elements, got {}", gguf::type_name(t), gguf::traits(t).block_size, n);
  switch (t) {
    case TensorType::Q4_0: return quantize_q4_0(x, out, n);
    case TensorType::Q5_0: return quantize_q5_0(x, out, n);
    case TensorType::Q5_1: return quantize_q5_1(x, out, n);
    case TensorType::Q4_K: return quantize_q4_k(x, out, n);
    case TensorType::Q5_K: return quantize_q5_k(x, out, n);
    case TensorType::Q6_K: return quantize_q6_k(x, out, n);
    default: fail("cannot quantize to {}", gguf::type_name(t));
  }
}

void dequantize_blocks(TensorType t, const uint8_t* in, float* y, size_t n) {
  switch (t) {
    case TensorType::Q4_0: return dequantize_q4_0(in, y, n);
    case TensorType::Q5_0: return dequantize_q5_0(in, y, n);
    case TensorType::Q5_1: return dequantize_q5_1(in, y, n);
    case TensorType::Q4_K: return dequantize_q4_k(in, y, n);
    case TensorType::Q5_K: return dequantize_q5_k(in, y, n);
    case TensorType::Q6_K: return dequantize_q6_k(in, y, n);
    default: fail("cannot dequantize {}", gguf::type_name(t));
  }
}

void round_activations_for(TensorType t, const float* x, float* y, size_t n) {
  switch (t) {
    case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K:
      return round_q8_k(x, y, n);
    case TensorType::Q8_0: case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q5_1:
      return kernels::round_q8_0_activations(x, y, n);
    default: fail("no activation rounding for {}", gguf::type_name(t));
  }
}

}  // namespace ggtrain::quant
