#pragma once
// Crash-safe file writes: data goes to a temporary file in the destination's
// folder, is fsync'ed, then renamed over the destination (and the folder is
// fsync'ed). A crash or error at any moment leaves either the old file or the
// complete new one, never a partial file under the final name.
#include <cstddef>
#include <string>

namespace ggtrain {

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string dest_path);
  ~AtomicFileWriter();  // removes the temp file unless commit() succeeded
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);
  void write_zeros(size_t n);
  // Rewrites n bytes at `offset` of what was written (e.g. a header whose
  // counts are known only at the end); the file position stays at the end.
  void overwrite_at(size_t offset, const void* data, size_t n);
  size_t bytes_written() const { return written_; }
  // fsync + rename + fsync(dir). Throws Error naming the file on failure.
  void commit();

 private:
  std::string dest_;
  std::string tmp_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// Whole-buffer convenience wrapper.
void write_file_atomic(const std::string& path, const void* data, size_t n);

}  // namespace ggtrain
