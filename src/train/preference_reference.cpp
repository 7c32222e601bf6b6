#include "train/preference_reference.h"

#include <cstring>
#include <filesystem>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/mapped_file.h"

namespace ggtrain::train {

namespace {

constexpr char kMagic[8] = {'G', 'G', 'T', 'R', 'E', 'F', '1', '\0'};

struct Header {
  char magic[8];
  uint64_t model, tokens;
  int64_t seq_len, n_tokens;
};

}  // namespace

uint64_t token_stream_fingerprint(const corpus::TokenStream& s) {
  uint64_t h = fnv1a(nullptr, 0);
  std::vector<int32_t> buf;
  constexpr int64_t kChunk = 1 << 16;
  for (int64_t start = 0; start < s.size(); start += kChunk) {
    const int64_t n = std::min(kChunk, s.size() - start);
    buf.resize(size_t(n));
    s.read(start, n, buf.data());
    h = fnv1a(buf.data(), size_t(n) * sizeof(int32_t), h);
  }
  return h;
}

void write_reference(const std::string& path, const ReferenceSource& source, const std::vector<float>& losses) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.model = source.model;
  h.tokens = source.tokens;
  h.seq_len = source.seq_len;
  h.n_tokens = int64_t(losses.size());
  AtomicFileWriter w(path);
  w.write(&h, sizeof(h));
  w.write(losses.data(), losses.size() * sizeof(float));
  w.commit();
}

std::vector<float> read_reference(const std::string& path, const ReferenceSource& source, int64_t n_tokens) {
  if (!std::filesystem::exists(path))
    fail("{}: missing; a resumed DPO/IPO run needs the reference log-probabilities it computed at its start "
         "(start a new run to compute them again)",
         path);
  MappedFile f(path);
  Header h{};
  if (f.size() < sizeof(h)) fail("{}: truncated ({} bytes); start a new run to compute it again", path, f.size());
  std::memcpy(&h, f.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) fail("{}: not a ggtrain reference file", path);
  if (h.model != source.model)
    fail("{}: computed from another init.from (fingerprint {:016x}, now {:016x}); the reference model of a DPO/IPO "
         "run is the one it started from: restore that file or start a new run",
         path, h.model, source.model);
  if (h.tokens != source.tokens || h.seq_len != source.seq_len || h.n_tokens != n_tokens)
    fail("{}: computed for other preference data ({} tokens in windows of {}, now {} in windows of {}); start a new "
         "run",
         path, h.n_tokens, h.seq_len, n_tokens, source.seq_len);
  if (f.size() != sizeof(h) + size_t(n_tokens) * sizeof(float))
    fail("{}: {} bytes where {} belong; start a new run to compute it again", path, f.size(),
         sizeof(h) + size_t(n_tokens) * sizeof(float));
  std::vector<float> losses(static_cast<size_t>(n_tokens));
  std::memcpy(losses.data(), f.data() + sizeof(h), losses.size() * sizeof(float));
  return losses;
}

}  // namespace ggtrain::train
