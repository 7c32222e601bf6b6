#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "util/error.h"

namespace ggtrain {

namespace {

std::string parent_dir(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems refuse O_DIRECTORY opens
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string dest_path) : dest_(std::move(dest_path)) {
  std::string tmpl = dest_ + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  fd_ = ::mkstemp(buf.data());
  if (fd_ < 0) fail("{}: cannot create temporary file: {}", dest_, errno_text(errno));
  tmp_ = buf.data();
  ::fchmod(fd_, 0644);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed after {} bytes: {}", dest_, written_, errno_text(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
    written_ += static_cast<size_t>(w);
  }
}

void AtomicFileWriter::write_zeros(size_t n) {
  static const char zeros[64] = {};
  while (n > 0) {
    size_t k = n < sizeof(zeros) ? n : sizeof(zeros);
    write(zeros, k);
    n -= k;
  }
}

void AtomicFileWriter::overwrite_at(size_t offset, const void* data, size_t n) {
  if (offset + n > written_) fail("{}: cannot rewrite bytes {}..{} of {} written", dest_, offset, offset + n, written_);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, p, n, off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed at byte {}: {}", dest_, offset, errno_text(errno));
    }
    p += w;
    n -= size_t(w);
    offset += size_t(w);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", dest_, errno_text(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("{}: close failed: {}", dest_, errno_text(errno));
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), dest_.c_str()) != 0) fail("{}: rename from {} failed: {}", dest_, tmp_, errno_text(errno));
  committed_ = true;
  fsync_dir(parent_dir(dest_));
}

void write_file_atomic(const std::string& path, const void* data, size_t n) {
  AtomicFileWriter w(path);
  w.write(data, n);
  w.commit();
}

}  // namespace ggtrain
