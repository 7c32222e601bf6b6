#pragma once
// SHA-256 (FIPS 180-4): the checksums a checkpoint records of its files, so
// that a resume or `ggtrain verify` notices bytes that changed on disk.
// The same digests `sha256sum` prints.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ggtrain {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  // The digest as 64 lowercase hex digits; the object is spent after it.
  std::string hex();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buffered_ = 0;
  uint64_t total_ = 0;  // bytes
};

// Of a whole file, read through its memory map; Error naming the file when
// it cannot be read.
std::string sha256_of_file(const std::string& path);

}  // namespace ggtrain
