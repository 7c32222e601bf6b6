#include "model/vocab_growth.h"

#include <algorithm>
#include <vector>

#include "util/error.h"

namespace ggtrain::model {

namespace {

void grow_rows(const ParamTensor& f, const float* src, int64_t old_vocab, const ParamTensor& t, float* dst) {
  const int64_t C = t.shape[1];
  if (f.shape[0] != old_vocab || f.shape[1] != C || t.shape[0] < old_vocab)
    fail("vocabulary growth: {} is [{}, {}] in the base and [{}, {}] after growing from {} tokens", t.name, f.shape[0],
         f.shape[1], t.shape[0], C, old_vocab);
  const float* s = src + f.offset;
  float* d = dst + t.offset;
  std::copy(s, s + old_vocab * C, d);
  std::vector<double> mean(size_t(C), 0.0);  // in double: summed over up to ~10^5 rows
  for (int64_t v = 0; v < old_vocab; ++v)
    for (int64_t c = 0; c < C; ++c) mean[size_t(c)] += s[v * C + c];
  for (int64_t v = old_vocab; v < t.shape[0]; ++v)
    for (int64_t c = 0; c < C; ++c) d[v * C + c] = float(mean[size_t(c)] / double(old_vocab));
}

}  // namespace

void grow_vocabulary(const ParamLayout& from, const float* src, int64_t old_vocab, const ParamLayout& to, float* dst) {
  for (const ParamTensor& t : to.tensors()) {
    const ParamTensor& f = from.get(t.name);
    if (t.name == "token_embd.weight" || t.name == "output.weight") {
      grow_rows(f, src, old_vocab, t, dst);
      continue;
    }
    if (f.shape != t.shape) fail("vocabulary growth: {} changes shape", t.name);
    std::copy(src + f.offset, src + f.offset + f.size, dst + t.offset);
  }
}

}  // namespace ggtrain::model
