#pragma once
// Shared by the fuzz targets: the readers under test take a path, so each
// input is written to an in-memory file (memfd) that they open and map by
// its /proc/self/fd path, as they would a file on disk.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ggtrain_fuzz {

class MemFile {
 public:
  MemFile() {
    fd_ = ::memfd_create("ggtrain-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  // Replaces the contents with data[0, size).
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      ssize_t w = ::pwrite(fd_, data + done, size - done, off_t(done));
      if (w <= 0) std::abort();
      done += size_t(w);
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// Keeps computed values alive so the optimizer cannot drop the reads.
inline void sink(uint64_t v) {
  static volatile uint64_t s;
  s = s + v;
}

// A property of the code under test does not hold: a finding.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace ggtrain_fuzz
