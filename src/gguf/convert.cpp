#include "gguf/convert.h"

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "util/error.h"

namespace ggtrain::gguf {

bool is_float_convertible(TensorType t) {
  return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16 ||
         t == TensorType::Q8_0 || quant::has_block_codec(t);
}

size_t storage_bytes(TensorType t, size_t n) {
  const auto& tr = traits(t);
  return n / tr.block_size * tr.type_size;
}

void encode_floats(TensorType t, const float* x, uint8_t* out, size_t n) {
  switch (t) {
    case TensorType::F32:
      std::memcpy(out, x, n * 4);
      return;
    case TensorType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h = fp32_to_fp16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case TensorType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h = fp32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case TensorType::Q8_0:
      if (n % kQ8Block != 0) fail("Q8_0 needs a multiple of 32 elements, got {}", n);
      quantize_q8_0(x, out, n);
      return;
    default:
      if (!quant::has_block_codec(t)) fail("cannot encode floats as {}", type_name(t));
      quant::quantize_blocks(t, x, out, n);
      return;
  }
}

void decode_floats(TensorType t, const uint8_t* in, float* y, size_t n) {
  switch (t) {
    case TensorType::F32:
      std::memcpy(y, in, n * 4);
      return;
    case TensorType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        y[i] = fp16_to_fp32(h);
      }
      return;
    case TensorType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        y[i] = bf16_to_fp32(h);
      }
      return;
    case TensorType::Q8_0:
      dequantize_q8_0(in, y, n);
      return;
    default:
      if (!quant::has_block_codec(t)) fail("cannot convert {} to float", type_name(t));
      quant::dequantize_blocks(t, in, y, n);
      return;
  }
}

}  // namespace ggtrain::gguf
