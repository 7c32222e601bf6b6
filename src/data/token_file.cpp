#include "data/token_file.h"

#include <cstring>

#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::data {

namespace {
constexpr char kMagic[8] = {'G', 'G', 'T', 'T', 'O', 'K', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 32;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t width;  // bytes per token: 2 or 4
  uint64_t vocab;
  uint64_t n_tokens;
};
static_assert(sizeof(Header) == kHeader);
}  // namespace

TokenFile::TokenFile(const std::string& path) : map_(path) {
  if (map_.size() < kHeader) fail("{}: not a token file (only {} bytes)", path, map_.size());
  Header h;
  std::memcpy(&h, map_.data(), kHeader);
  if (std::memcmp(h.magic, kMagic, 8) != 0) fail("{}: not a ggtrain token file (bad magic)", path);
  if (h.version != kVersion) fail("{}: token file version {} is not supported", path, h.version);
  if (h.width != 2 && h.width != 4) fail("{}: token width {} must be 2 or 4", path, h.width);
  if (h.vocab == 0 || h.vocab > (uint64_t(1) << 31)) fail("{}: vocab {} is invalid", path, h.vocab);
  if (h.n_tokens > (map_.size() - kHeader) / h.width || kHeader + h.n_tokens * h.width != map_.size())
    fail("{}: token count {} does not match the file size {}", path, h.n_tokens, map_.size());
  n_ = int64_t(h.n_tokens);
  vocab_ = int64_t(h.vocab);
  width_ = h.width;
  data_ = map_.data() + kHeader;
  for (int64_t i = 0; i < n_; ++i)
    if ((*this)[i] < 0 || (*this)[i] >= vocab_)
      fail("{}: token {} at index {} is outside the vocabulary of {}", path, (*this)[i], i, vocab_);
}

int32_t TokenFile::operator[](int64_t i) const {
  if (width_ == 2) {
    uint16_t v;
    std::memcpy(&v, data_ + 2 * i, 2);
    return int32_t(v);
  }
  uint32_t v;
  std::memcpy(&v, data_ + 4 * i, 4);
  return int32_t(v);
}

void write_token_file(const std::string& path, int64_t vocab, const std::vector<int32_t>& ids) {
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.width = vocab <= 65536 ? 2 : 4;
  h.vocab = uint64_t(vocab);
  h.n_tokens = ids.size();
  std::vector<uint8_t> body(ids.size() * h.width);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) fail("{}: token {} outside vocabulary {}", path, ids[i], vocab);
    if (h.width == 2) {
      uint16_t v = uint16_t(ids[i]);
      std::memcpy(body.data() + 2 * i, &v, 2);
    } else {
      uint32_t v = uint32_t(ids[i]);
      std::memcpy(body.data() + 4 * i, &v, 4);
    }
  }
  AtomicFileWriter w(path);
  w.write(&h, kHeader);
  w.write(body.data(), body.size());
  w.commit();
}

}  // namespace ggtrain::data
