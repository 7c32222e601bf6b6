// The decompressed bytes of one corpus file. Memory stays bounded: one fixed
// input buffer for compressed bytes, the decoder's own state (a 32 KiB
// window for gzip, at most zstd's default 128 MiB window limit), and the
// caller's buffer for the output.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <vector>

#include "corpus/input/documents.h"
#include "util/error.h"

namespace ggtrain::corpus {

namespace {

constexpr size_t kInputBufferBytes = size_t(1) << 20;

// The file on disk, read in chunks with read(2).
class FileSource {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("{}: cannot open: {}", path, errno_text(errno));
  }
  ~FileSource() { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  // Up to n bytes; 0 only at the end of the file.
  size_t read(char* buf, size_t n) {
    for (;;) {
      ssize_t got = ::read(fd_, buf, n);
      if (got >= 0) {
        bytes_read_ += uint64_t(got);
        return size_t(got);
      }
      if (errno != EINTR) fail("{}: read failed: {}", path_, errno_text(errno));
    }
  }
  uint64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_read_ = 0;
};

// Compressed bytes waiting for a decoder: the part [pos, end) of a fixed buffer.
class InputBuffer {
 public:
  explicit InputBuffer(FileSource* src) : src_(src), buf_(kInputBufferBytes) {}
  bool empty() const { return pos_ == end_; }
  bool at_eof() const { return eof_; }
  // Reads the next chunk once everything before it was consumed.
  void refill() {
    if (!empty() || eof_) return;
    pos_ = 0;
    end_ = src_->read(buf_.data(), buf_.size());
    eof_ = end_ == 0;
  }
  const char* data() const { return buf_.data() + pos_; }
  size_t size() const { return end_ - pos_; }
  void consume(size_t n) { pos_ += n; }
  // Bytes of the file the decoder has taken (read minus still buffered).
  uint64_t consumed() const { return src_->bytes_read() - size(); }

 private:
  FileSource* src_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual size_t read(char* buf, size_t n) = 0;
  virtual uint64_t compressed_bytes_read() const = 0;
};

class PlainDecoder : public Decoder {
 public:
  explicit PlainDecoder(const std::string& path) : src_(path) {}
  size_t read(char* buf, size_t n) override { return src_.read(buf, n); }
  uint64_t compressed_bytes_read() const override { return src_.bytes_read(); }

 private:
  FileSource src_;
};

// Shared by gzip and zstd: feed input, take output, and tell a clean end
// (the last stream/frame complete) from a truncated one.
class StreamDecoder : public Decoder {
 public:
  StreamDecoder(const std::string& path, const char* format) : src_(path), in_(&src_), format_(format) {}

  size_t read(char* buf, size_t n) override {
    if (n == 0) return 0;
    for (;;) {
      in_.refill();
      size_t produced = step(buf, n);
      if (produced > 0) return produced;
      if (in_.empty() && in_.at_eof()) {
        if (inside_stream()) fail_at("unexpected end of file");
        return 0;
      }
    }
  }
  uint64_t compressed_bytes_read() const override { return in_.consumed(); }

 protected:
  // Decodes from in_ into buf; may produce nothing (headers, or when it
  // needs more input).
  virtual size_t step(char* buf, size_t n) = 0;
  // True while a gzip member or zstd frame is started and not finished (also
  // before the first one: an empty file is no valid .gz/.zst).
  virtual bool inside_stream() const = 0;

  [[noreturn]] void fail_at(const std::string& why) const {
    fail("{}: truncated or corrupt {} stream at compressed byte {} ({})", src_.path(), format_, in_.consumed(), why);
  }

  FileSource src_;
  InputBuffer in_;

 private:
  const char* format_;
};

class GzipDecoder : public StreamDecoder {
 public:
  explicit GzipDecoder(const std::string& path) : StreamDecoder(path, "gzip") {
    // 15 + 32: the largest window, and detect the gzip (or zlib) header.
    if (inflateInit2(&z_, 15 + 32) != Z_OK) fail("{}: cannot start a gzip decoder (out of memory?)", path);
  }
  ~GzipDecoder() override { inflateEnd(&z_); }

 protected:
  size_t step(char* buf, size_t n) override {
    if (member_done_) {
      // `cat a.gz b.gz` is a valid .gz: after one member, another may follow.
      if (in_.empty()) return 0;
      inflateReset(&z_);
      member_done_ = false;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in_.data()));
    z_.avail_in = uInt(in_.size());
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = uInt(std::min<size_t>(n, UINT32_MAX));
    int ret = inflate(&z_, Z_NO_FLUSH);
    in_.consume(in_.size() - z_.avail_in);
    if (ret == Z_STREAM_END) member_done_ = true;
    else if (ret != Z_OK && ret != Z_BUF_ERROR)  // Z_BUF_ERROR: no progress without more input
      fail_at(z_.msg ? z_.msg : zError(ret));
    return size_t(reinterpret_cast<char*>(z_.next_out) - buf);
  }
  bool inside_stream() const override { return !member_done_; }

 private:
  z_stream z_{};
  bool member_done_ = false;
};

class ZstdDecoder : public StreamDecoder {
 public:
  explicit ZstdDecoder(const std::string& path) : StreamDecoder(path, "zstd"), dctx_(ZSTD_createDCtx()) {
    if (!dctx_) fail("{}: cannot start a zstd decoder (out of memory?)", path);
  }
  ~ZstdDecoder() override { ZSTD_freeDCtx(dctx_); }

 protected:
  // Frames follow one another without a reset: the context starts the next
  // frame by itself once one is complete.
  size_t step(char* buf, size_t n) override {
    // Between frames with no input there is nothing to flush, and a call
    // would report a new frame as started.
    if (!frame_open_ && in_.empty()) return 0;
    ZSTD_inBuffer in{in_.data(), in_.size(), 0};
    ZSTD_outBuffer out{buf, n, 0};
    size_t ret = ZSTD_decompressStream(dctx_, &out, &in);
    in_.consume(in.pos);
    if (ZSTD_isError(ret)) fail_at(ZSTD_getErrorName(ret));
    frame_open_ = ret != 0;  // 0: a frame is complete and fully flushed
    return out.pos;
  }
  bool inside_stream() const override { return frame_open_; }

 private:
  ZSTD_DCtx* dctx_;
  bool frame_open_ = true;  // before the first frame too: an empty file is truncated
};

std::unique_ptr<Decoder> make_decoder(const InputFile& file) {
  switch (file.compression) {
    case Compression::kGzip: return std::make_unique<GzipDecoder>(file.path);
    case Compression::kZstd: return std::make_unique<ZstdDecoder>(file.path);
    case Compression::kNone: break;
  }
  return std::make_unique<PlainDecoder>(file.path);
}

}  // namespace

struct ByteStream::Impl {
  std::unique_ptr<Decoder> decoder;
  uint64_t bytes_out = 0;
};

ByteStream::ByteStream(const InputFile& file) : impl_(std::make_unique<Impl>()) { impl_->decoder = make_decoder(file); }

ByteStream::~ByteStream() = default;

size_t ByteStream::read(char* buf, size_t n) {
  size_t got = impl_->decoder->read(buf, n);
  impl_->bytes_out += got;
  return got;
}

uint64_t ByteStream::compressed_bytes_read() const { return impl_->decoder->compressed_bytes_read(); }

uint64_t ByteStream::bytes_out() const { return impl_->bytes_out; }

}  // namespace ggtrain::corpus
