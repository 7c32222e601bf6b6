// Pretokenized corpus files (llm.c and nanoGPT .bin): the header or size
// checks, and the token stream cut into documents at the EOS id.
#include "corpus/input/token_documents.h"

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "util/error.h"

namespace ggtrain::corpus {

namespace {

constexpr size_t kChunkBytes = size_t(1) << 20;  // a multiple of both token widths

// The files are little endian whatever the host is.
uint32_t le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// Up to n bytes from the start of the file (fewer when it is shorter).
std::vector<unsigned char> read_head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", path, errno_text(errno));
  std::vector<unsigned char> head(n);
  in.read(reinterpret_cast<char*>(head.data()), std::streamsize(n));
  head.resize(size_t(in.gcount()));
  return head;
}

bool is_llmc_magic(int32_t magic) { return magic == kLlmcMagicGpt2 || magic == kLlmcMagicLlama3; }

// The token width an llm.c (magic, version) pair stands for; fails on any
// other pair, as llm.c's own loader does.
int llmc_token_width(const std::string& path, int32_t magic, int32_t version) {
  if (!is_llmc_magic(magic))
    fail("{}: not an llm.c token file: magic {}, expected {} (uint16 tokens) or {} (uint32 tokens)", path, magic,
         kLlmcMagicGpt2, kLlmcMagicLlama3);
  const bool gpt2 = magic == kLlmcMagicGpt2;
  const int32_t expected = gpt2 ? 1 : 7;
  if (version != expected)
    fail("{}: llm.c token file version {} is not supported (magic {} goes with version {})", path, version, magic,
         expected);
  return gpt2 ? 2 : 4;
}

TokenFileLayout llmc_layout(const InputFile& f) {
  const auto head = read_head(f.path, kLlmcHeaderBytes);
  if (head.size() < kLlmcHeaderBytes)
    fail("{}: not an llm.c token file: {} bytes, shorter than its {}-byte header", f.path, head.size(),
         kLlmcHeaderBytes);
  const int32_t magic = int32_t(le32(&head[0])), version = int32_t(le32(&head[4])), count = int32_t(le32(&head[8]));
  TokenFileLayout l;
  l.offset = kLlmcHeaderBytes;
  l.width = llmc_token_width(f.path, magic, version);
  // Exact: a shorter file is truncated, a longer one not what llm.c wrote.
  const uint64_t want = kLlmcHeaderBytes + uint64_t(std::max(count, 0)) * uint64_t(l.width);
  if (count < 0 || want != f.size)
    fail("{}: the llm.c header gives {} tokens ({} bytes with the header), but the file has {} bytes "
         "(truncated or not an llm.c file)",
         f.path, count, want, f.size);
  l.count = uint64_t(count);
  return l;
}

}  // namespace

bool is_pretokenized(FileType t) { return t == FileType::kLlmc || t == FileType::kNanoGpt; }

FileType detect_bin_type(const std::string& path) {
  const auto head = read_head(path, 4);
  return head.size() == 4 && is_llmc_magic(int32_t(le32(head.data()))) ? FileType::kLlmc : FileType::kNanoGpt;
}

TokenFileLayout token_file_layout(const InputFile& f) {
  // The header and size checks need the token bytes on disk as they are.
  if (f.compression != Compression::kNone)
    fail("{}: compressed token files are not supported: decompress it first", f.path);
  if (f.type == FileType::kLlmc) return llmc_layout(f);
  if (f.size % 2 != 0)
    fail("{}: a nanoGPT token file holds 2-byte tokens, but its size {} is odd (truncated or not a token file)", f.path,
         f.size);
  return TokenFileLayout{0, 2, f.size / 2};
}

TokenDocumentReader::TokenDocumentReader(const InputFile& file, int64_t vocab_size, int32_t eos_id)
    : file_(file),
      layout_(token_file_layout(file)),
      vocab_(vocab_size),
      eos_(eos_id),
      stream_(std::make_unique<ByteStream>(file)),
      buf_(kChunkBytes) {
  // Skip the header (already checked).
  for (uint64_t left = layout_.offset; left > 0;) {
    const size_t got =
        stream_->read(reinterpret_cast<char*>(buf_.data()), size_t(std::min<uint64_t>(left, buf_.size())));
    if (got == 0) fail("{}: ended inside its header (changed while being read?)", file_.path);
    left -= got;
  }
}

TokenDocumentReader::~TokenDocumentReader() = default;

// The next chunk of whole tokens into buf_; false after the last token.
bool TokenDocumentReader::refill() {
  const uint64_t left = layout_.count - buffered_;
  if (left == 0) return false;
  const size_t want = size_t(std::min<uint64_t>(left * uint64_t(layout_.width), buf_.size()));
  size_t got = 0;
  while (got < want) {
    const size_t n = stream_->read(reinterpret_cast<char*>(buf_.data()) + got, want - got);
    if (n == 0)
      fail("{}: ended after {} of its {} tokens (changed while being read?)", file_.path,
           buffered_ + got / size_t(layout_.width), layout_.count);
    got += n;
  }
  pos_ = 0;
  end_ = want / size_t(layout_.width);
  buffered_ += end_;
  return true;
}

int32_t TokenDocumentReader::token_at(size_t i) const {
  const unsigned char* p = buf_.data() + i * size_t(layout_.width);
  const uint32_t id = layout_.width == 2 ? uint32_t(p[0]) | uint32_t(p[1]) << 8 : le32(p);
  // Checked here, not left to training: an id past the vocabulary would
  // index past the embedding table.
  if (int64_t(id) >= vocab_)
    fail("{}: token {} is id {}, past the vocabulary of data.tokenizer ({} tokens; is it the vocabulary these "
         "tokens were made with?)",
         file_.path, consumed_, id, vocab_);
  return int32_t(id);
}

bool TokenDocumentReader::next(std::vector<int32_t>* doc) {
  doc->clear();
  while (doc->size() < kMaxDocumentTokens) {
    if (pos_ == end_ && !refill()) break;
    const int32_t id = token_at(pos_);
    ++pos_;
    ++consumed_;
    doc->push_back(id);
    if (id == eos_) break;
  }
  if (doc->empty()) return false;
  ++documents_;
  return true;
}

uint64_t TokenDocumentReader::compressed_bytes_read() const {
  return layout_.offset + consumed_ * uint64_t(layout_.width);
}

}  // namespace ggtrain::corpus
