#include "corpus/token_file.h"

#include <algorithm>
#include <cstring>

#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::corpus {

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
}

int32_t TokenFile::operator[](int64_t i) const {
  uint32_t v;
  if (width_ == 2) {
    uint16_t v16;
    std::memcpy(&v16, data_ + 2 * i, 2);
    v = v16;
  } else {
    std::memcpy(&v, data_ + 4 * i, 4);
  }
  if (v >= uint64_t(vocab_)) fail("{}: token {} at index {} is outside the vocabulary of {}", path(), v, i, vocab_);
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

TokenFileWriter::TokenFileWriter(const std::string& path, int64_t vocab)
    : path_(path), out_(path), vocab_(vocab), width_(vocab <= 65536 ? 2 : 4) {
  if (vocab <= 0 || vocab > (int64_t(1) << 31)) fail("{}: vocab {} is invalid", path, vocab);
  out_.write_zeros(kHeader);  // filled in by commit()
  buf_.reserve(1 << 20);
}

void TokenFileWriter::append(const int32_t* ids, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_) fail("{}: token {} outside vocabulary {}", path_, ids[i], vocab_);
    const uint32_t v = uint32_t(ids[i]);
    const size_t at = buf_.size();
    buf_.resize(at + width_);
    if (width_ == 2) {
      const uint16_t v16 = uint16_t(v);
      std::memcpy(buf_.data() + at, &v16, 2);
    } else {
      std::memcpy(buf_.data() + at, &v, 4);
    }
    if (buf_.size() >= (1 << 20)) flush();
  }
  n_ += int64_t(n);
}

void TokenFileWriter::flush() {
  out_.write(buf_.data(), buf_.size());
  buf_.clear();
}

void TokenFileWriter::commit() {
  flush();
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.width = width_;
  h.vocab = uint64_t(vocab_);
  h.n_tokens = uint64_t(n_);
  out_.overwrite_at(0, &h, kHeader);
  out_.commit();
}

TokenStream::TokenStream(const std::vector<std::string>& paths) {
  if (paths.empty()) fail("no token files to read");
  for (const auto& p : paths) {
    shards_.push_back(std::make_unique<TokenFile>(p));
    const auto& f = *shards_.back();
    if (vocab_ != 0 && f.vocab() != vocab_)
      fail("{}: vocabulary {} differs from the {} of {}", p, f.vocab(), vocab_, paths.front());
    vocab_ = f.vocab();
    starts_.push_back(n_);
    n_ += f.size();
  }
}

void TokenStream::read(int64_t start, int64_t n, int32_t* out) const {
  // The last shard starting at or before `start`.
  size_t s = size_t(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
  for (int64_t i = 0; i < n; ++i) {
    while (s + 1 < shards_.size() && start + i >= starts_[s + 1]) ++s;
    out[i] = (*shards_[s])[start + i - starts_[s]];
  }
}

std::string TokenStream::describe() const {
  if (shards_.size() == 1) return shards_[0]->path();
  return fmt::format("{} ... ({} shards)", shards_[0]->path(), shards_.size());
}

}  // namespace ggtrain::corpus
