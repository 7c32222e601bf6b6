// Fuzz target: the token-file reader (data/*.tok). Every id it returns from
// a file it opened must be inside the declared vocabulary; anything else
// (a bad header, a bad size, an id read past the vocabulary) must be
// rejected with a ggtrain::Error.
#include "corpus/token_file.h"
#include "fuzz_util.h"
#include "util/error.h"

using namespace ggtrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ggtrain_fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    corpus::TokenFile tf(path);
    if (tf.size() < 0 || tf.vocab() <= 0) ggtrain_fuzz::finding("bad size or vocab accepted");
    uint64_t acc = 0;
    for (int64_t i = 0; i < tf.size(); ++i) {
      const int32_t id = tf[i];
      if (id < 0 || id >= tf.vocab()) ggtrain_fuzz::finding("id outside the vocabulary accepted");
      acc += uint64_t(id);
    }
    ggtrain_fuzz::sink(acc);
  } catch (const Error&) {
  }
  return 0;
}
