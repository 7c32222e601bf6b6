#pragma once
// A tokenized corpus on disk: a 32-byte header (magic "GGTTOK01", version,
// bytes per token, vocabulary size, token count) and the ids, read through
// a memory map so a corpus is tokenized once and never copied into memory.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/mapped_file.h"

namespace ggtrain::data {

class TokenFile {
 public:
  // Validates the header, the size and every id against the vocabulary.
  explicit TokenFile(const std::string& path);
  int64_t size() const { return n_; }
  int64_t vocab() const { return vocab_; }
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

}  // namespace ggtrain::data
