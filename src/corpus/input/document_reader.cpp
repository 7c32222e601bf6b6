// Splitting a file's decompressed bytes into documents: text lines,
// blank-line paragraphs, whole files, or the text member of JSONL records.
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "corpus/input/documents.h"
#include "util/error.h"
#include "util/utf8.h"

namespace ggtrain::corpus {

namespace {

constexpr size_t kReadBufferBytes = size_t(1) << 20;

// Spaces and tabs only (a '\r' is already gone): no paragraph, no record.
bool is_blank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t'; });
}

const char* json_type_name(simdjson::dom::element_type t) {
  using T = simdjson::dom::element_type;
  switch (t) {
    case T::ARRAY: return "an array";
    case T::OBJECT: return "an object";
    case T::INT64:
    case T::UINT64:
    case T::DOUBLE: return "a number";
    case T::STRING: return "a string";
    case T::BOOL: return "a boolean";
    case T::NULL_VALUE: return "null";
  }
  return "another JSON value";
}

// The decompressed file as lines, read through one fixed buffer; a line
// longer than the buffer is assembled from several reads.
class LineSource {
 public:
  explicit LineSource(const InputFile& file) : stream_(file), buf_(kReadBufferBytes) {}

  // The next line without its '\n' and a trailing '\r'; false at the end.
  // The file's last line counts even without a final '\n'.
  bool next(std::string* line) {
    line->clear();
    bool newline = false, any = false;
    while (!newline && (pos_ < end_ || fill())) {
      const char* start = buf_.data() + pos_;
      const char* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
      size_t take = nl ? size_t(nl - start) : end_ - pos_;
      line->append(start, take);
      pos_ += take + (nl ? 1 : 0);
      newline = nl != nullptr;
      any = true;
    }
    if (!any) return false;
    line_offset_ = consumed_;
    consumed_ += line->size() + (newline ? 1 : 0);
    ++line_number_;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    return true;
  }

  // Everything not yet read, appended to *out.
  void read_rest(std::string* out) {
    out->append(buf_.data() + pos_, end_ - pos_);
    consumed_ += end_ - pos_;
    pos_ = end_;
    while (fill()) {
      out->append(buf_.data(), end_);
      consumed_ += end_;
      pos_ = end_;
    }
  }

  int64_t line_number() const { return line_number_; }  // of the line last returned, from 1
  uint64_t line_offset() const { return line_offset_; }  // its first byte's decompressed offset
  uint64_t consumed() const { return consumed_; }
  uint64_t compressed_bytes_read() const { return stream_.compressed_bytes_read(); }

 private:
  bool fill() {
    pos_ = 0;
    end_ = stream_.read(buf_.data(), buf_.size());
    return end_ > 0;
  }

  ByteStream stream_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  uint64_t consumed_ = 0, line_offset_ = 0;
  int64_t line_number_ = 0;
};

}  // namespace

struct DocumentReader::Impl {
  Impl(const InputFile& f, const DocumentOptions& o) : file(f), options(o), lines(f) {}

  bool next(std::string* doc) {
    switch (file.type) {
      case FileType::kJsonl: return next_record(doc);
      case FileType::kText: break;
      case FileType::kLlmc:
      case FileType::kNanoGpt:  // token files are read by TokenDocumentReader
        fail("{}: a token file cannot be read as text", file.path);
    }
    switch (options.separator) {
      case DocSeparator::kLine: return next_line(doc);
      case DocSeparator::kBlankLine: return next_paragraph(doc);
      case DocSeparator::kFile: return next_whole_file(doc);
    }
    return false;
  }

  // Fails with `message` (OnBadDocument::kError), or counts the document as
  // skipped (kSkip) and returns so the caller moves on.
  void reject(const std::string& message) {
    if (options.on_bad == OnBadDocument::kError) throw Error(message);
    if (skipped++ == 0) first_skipped = message;
  }

  std::string utf8_message(uint64_t offset, int64_t line) const {
    return fmt::format("{}: invalid UTF-8 at byte {} (line {})", file.path, offset, line);
  }

  // The current line's text is valid UTF-8; if not, it is rejected.
  bool line_is_utf8(const std::string& text) {
    int64_t bad = first_invalid_utf8(text.data(), text.size());
    if (bad < 0) return true;
    reject(utf8_message(lines.line_offset() + uint64_t(bad), lines.line_number()));
    return false;
  }

  bool next_line(std::string* doc) {
    while (lines.next(doc))
      if (!doc->empty() && line_is_utf8(*doc)) return true;
    return false;
  }

  // Lines are checked one by one, so that the message can name the line;
  // a paragraph with a bad line is consumed to its end and skipped whole.
  bool next_paragraph(std::string* doc) {
    for (;;) {
      doc->clear();
      bool started = false, bad = false;
      while (lines.next(&line)) {
        if (is_blank(line)) {
          if (started) break;
          continue;
        }
        if (!bad && !line_is_utf8(line)) bad = true;
        if (!bad) {
          if (started) doc->push_back('\n');
          doc->append(line);
        }
        started = true;
      }
      if (!started) return false;
      if (!bad) return true;
    }
  }

  bool next_whole_file(std::string* doc) {
    if (file_done) return false;
    file_done = true;
    doc->clear();
    lines.read_rest(doc);
    if (doc->empty()) return false;
    int64_t bad = first_invalid_utf8(doc->data(), doc->size());
    if (bad < 0) return true;
    int64_t line = 1 + std::count(doc->begin(), doc->begin() + bad, '\n');
    reject(utf8_message(uint64_t(bad), line));
    return false;
  }

  bool next_record(std::string* doc) {
    while (lines.next(&line)) {
      if (is_blank(line) || !line_is_utf8(line)) continue;
      if (record_text(doc) && !doc->empty()) return true;
    }
    return false;
  }

  // The text member of the JSON object on the current line, into *doc. The
  // DOM parser (not On Demand) because it validates the whole line: On
  // Demand would accept `{"text": "a", "x": tru}` as long as `x` is never read.
  bool record_text(std::string* doc) {
    line.reserve(line.size() + simdjson::SIMDJSON_PADDING);  // the parser reads past the end
    simdjson::dom::element root;
    if (auto err = parser.parse(line.data(), line.size(), false).get(root)) {
      reject(fmt::format("{}: not valid JSON ({})", where(), simdjson::error_message(err)));
      return false;
    }
    simdjson::dom::object object;
    if (root.get_object().get(object)) {
      reject(fmt::format("{}: not a JSON object but {} (each line must be an object with a string member \"{}\")",
                         where(), json_type_name(root.type()), options.text_key));
      return false;
    }
    simdjson::dom::element value;
    if (object.at_key(options.text_key).get(value)) {
      reject(fmt::format("{}: no string member \"{}\" (set data.text_key)", where(), options.text_key));
      return false;
    }
    std::string_view text;
    if (value.get_string().get(text)) {
      reject(fmt::format("{}: no string member \"{}\" (set data.text_key): it is {}", where(), options.text_key,
                         json_type_name(value.type())));
      return false;
    }
    doc->assign(text);
    return true;
  }

  std::string where() const { return fmt::format("{}:{}", file.path, lines.line_number()); }

  InputFile file;
  DocumentOptions options;
  LineSource lines;
  std::string line;  // the current line, reused to keep its capacity
  simdjson::dom::parser parser;
  bool file_done = false;
  int64_t documents = 0;
  int64_t skipped = 0;
  std::string first_skipped;
};

DocumentReader::DocumentReader(const InputFile& file, const DocumentOptions& options)
    : impl_(std::make_unique<Impl>(file, options)) {}

DocumentReader::~DocumentReader() = default;

bool DocumentReader::next(std::string* doc) {
  if (!impl_->next(doc)) return false;
  ++impl_->documents;
  return true;
}

int64_t DocumentReader::documents_read() const { return impl_->documents; }
int64_t DocumentReader::skipped() const { return impl_->skipped; }
const std::string& DocumentReader::first_skipped() const { return impl_->first_skipped; }
int64_t DocumentReader::line_number() const { return impl_->lines.line_number(); }
uint64_t DocumentReader::compressed_bytes_read() const { return impl_->lines.compressed_bytes_read(); }
uint64_t DocumentReader::bytes_read() const { return impl_->lines.consumed(); }

}  // namespace ggtrain::corpus
