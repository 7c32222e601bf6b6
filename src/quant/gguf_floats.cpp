#include "quant/gguf_floats.h"

#include "quant/type_traits.h"
#include "util/error.h"

namespace ggtrain::quant {

std::vector<float> tensor_floats(const gguf::GgufFile& f, const gguf::TensorInfo& t) {
  const TypeCodec* c = find_codec(t.type);
  if (!c)
    fail("{}: tensor '{}' has type {}, which cannot be converted to float ({} can)", f.path(), t.name,
         gguf::type_name(t.type), codec_type_names());
  std::vector<float> out(static_cast<size_t>(t.n_elements));
  // A tensor with a zero dimension has no data: nothing to convert (and
  // out.data() may be null, which memcpy must not be given).
  if (!out.empty()) c->to_float(t.data, out.data(), out.size());
  return out;
}

void add_float_tensor(gguf::GgufWriter& w, const std::string& name, gguf::TensorType type, std::vector<uint64_t> ne,
                      const float* data) {
  const TypeCodec* c = find_codec(type);
  if (!c) fail("GGUF writer: tensor '{}': cannot store floats as {}", name, gguf::type_name(type));
  w.add_tensor_encoded(name, type, std::move(ne), data, c->from_float);
}

}  // namespace ggtrain::quant
