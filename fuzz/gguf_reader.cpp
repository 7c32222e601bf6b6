// Fuzz target: the GGUF reader on arbitrary bytes. A valid file must have
// every tensor readable (to_float for F32/F16/BF16/Q8_0, to_i32 for I32),
// every metadata key answer the typed getters (value or Error), and both
// inspect listings must work. The same bytes as an importance matrix
// (GGUF, or llama-imatrix's legacy .dat when the magic is not GGUF's) must
// read or be refused. Any rejection must be a ggtrain::Error;
// anything else (crash, sanitizer report, other exception) is a finding.
#include <cstring>

#include "fuzz_util.h"
#include "gguf/inspect.h"
#include "gguf/reader.h"
#include "kernels/number_formats.h"
#include "quant/gguf_floats.h"
#include "quant/importance_matrix.h"
#include "quant/type_traits.h"
#include "util/error.h"

using namespace ggtrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ggtrain_fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    gguf::GgufFile f(path);
    for (const auto& t : f.tensors()) {
      if (quant::is_float_convertible(t.type)) {
        auto v = quant::tensor_floats(f, t);
        if (v.size() != t.n_elements) ggtrain_fuzz::finding("to_float returned the wrong count");
        uint32_t acc = 0;
        for (float x : v) {
          uint32_t bits;
          std::memcpy(&bits, &x, 4);
          acc ^= bits;
        }
        ggtrain_fuzz::sink(acc);
      } else if (t.type == gguf::TensorType::I32) {
        auto v = f.to_i32(t);
        int64_t acc = 0;
        for (int32_t x : v) acc += x;
        ggtrain_fuzz::sink(uint64_t(acc));
      } else {
        // Other types: only the declared byte range may be touched.
        uint64_t acc = 0;
        for (uint64_t i = 0; i < t.n_bytes; ++i) acc += t.data[i];
        ggtrain_fuzz::sink(acc);
      }
    }
    for (const auto& [key, value] : f.metadata()) {
      try {
        ggtrain_fuzz::sink(f.get_uint(key));
      } catch (const Error&) {
      }
      try {
        ggtrain_fuzz::sink(uint64_t(f.get_float(key) != 0));
      } catch (const Error&) {
      }
      try {
        ggtrain_fuzz::sink(f.get_bool(key));
      } catch (const Error&) {
      }
      try {
        ggtrain_fuzz::sink(f.get_string(key).size());
      } catch (const Error&) {
      }
      if (f.find(key) != &value) ggtrain_fuzz::finding("find() does not return the key's value");
    }
    for (const auto& t : f.tensors())
      if (f.find_tensor(t.name) != &t) ggtrain_fuzz::finding("find_tensor() does not return the tensor");
    // As `ggtrain inspect --json` and `ggtrain inspect` print them.
    const std::string json = gguf::inspect_json(f).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string text = gguf::inspect_text(f);
    ggtrain_fuzz::sink(json.size() + text.size());
  } catch (const Error&) {
    // A clean rejection naming the file and field.
  }
  try {
    const quant::ImportanceMatrix m = quant::read_importance_matrix(path);
    for (const auto& [name, e] : m.entries) {
      if (e.counts.empty() || e.sums.size() % e.counts.size() != 0)
        ggtrain_fuzz::finding("an entry's sums are not whole rows per count");
      ggtrain_fuzz::sink(quant::importance_values(e, m.legacy).size());
    }
  } catch (const Error&) {
  }
  return 0;
}
