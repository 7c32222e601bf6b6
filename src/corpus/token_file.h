#pragma once
// A tokenized corpus on disk: a 32-byte header (magic "GGTTOK01", version,
// bytes per token, vocabulary size, token count) and the ids, read through
// a memory map so a corpus is tokenized once and never copied into memory.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/atomic_file.h"
#include "util/mapped_file.h"

namespace ggtrain::corpus {

class TokenFile {
 public:
  // Validates the header and the size. The ids are checked against the
  // vocabulary as they are read, not here: opening a corpus then costs
  // nothing however large it is, and its pages are only mapped in when a
  // window reads them.
  explicit TokenFile(const std::string& path);
  int64_t size() const { return n_; }
  int64_t vocab() const { return vocab_; }
  // Token i (0 <= i < size()); an Error naming the file and the index when
  // the id is outside the vocabulary.
  int32_t operator[](int64_t i) const;
  const std::string& path() const { return map_.path(); }

 private:
  MappedFile map_;
  int64_t n_ = 0, vocab_ = 0;
  uint32_t width_ = 0;
  const uint8_t* data_ = nullptr;
};

// Atomic write; uint16 ids when the vocabulary fits, uint32 otherwise.
void write_token_file(const std::string& path, int64_t vocab, const std::vector<int32_t>& ids);

// The same file written as a stream: ids are appended through a small
// buffer, the header's count is filled in by commit(), and the file appears
// under its name only then (a crash leaves no partial shard).
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, int64_t vocab);
  void append(const int32_t* ids, size_t n);
  int64_t size() const { return n_; }
  void commit();

 private:
  void flush();
  std::string path_;
  AtomicFileWriter out_;
  int64_t vocab_, n_ = 0;
  uint32_t width_;
  std::vector<uint8_t> buf_;
};

// Several token files read as one stream, in order (the shards of a
// prepared corpus): the loader's windows run across shard boundaries exactly
// as they would in one file holding the concatenation.
class TokenStream {
 public:
  explicit TokenStream(const std::vector<std::string>& paths);
  int64_t size() const { return n_; }
  int64_t vocab() const { return vocab_; }
  // Copies tokens [start, start + n) into out.
  void read(int64_t start, int64_t n, int32_t* out) const;
  // The first shard's path, or "a, b, ... (N shards)": for messages.
  std::string describe() const;

 private:
  std::vector<std::unique_ptr<TokenFile>> shards_;
  std::vector<int64_t> starts_;  // starts_[i]: stream index of shard i's first token
  int64_t n_ = 0, vocab_ = 0;
};

}  // namespace ggtrain::corpus
