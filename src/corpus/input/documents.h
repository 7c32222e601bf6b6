#pragma once
// Reading a corpus as a stream of documents: which files a `data.corpus`
// names (files, folders, globs, lists), how each is decompressed (gzip,
// zstd) and how its bytes split into documents (text lines, blank-line
// paragraphs, whole files, JSONL records). Nothing here holds more than one
// read buffer and one document in memory, whatever the corpus size.
// Pretokenized files (llm.c, nanoGPT) are read by token_documents.h.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::corpus {

// kLlmc and kNanoGpt hold token ids, not text (corpus/input/token_documents.h).
enum class FileType { kText, kJsonl, kLlmc, kNanoGpt };
// "text", "jsonl", "llmc", "nanogpt": the names data.file_type and the
// manifest give them.
std::string_view file_type_name(FileType t);
enum class Compression { kNone, kGzip, kZstd };
enum class DocSeparator { kLine, kBlankLine, kFile };
enum class OnBadDocument { kError, kSkip };

struct InputFile {
  std::string path;
  FileType type = FileType::kText;
  Compression compression = Compression::kNone;
  uint64_t size = 0;  // bytes on disk
  int64_t mtime_ns = 0;  // modification time, for the manifest
};

// Expands each spec: a file; a folder (every regular file below it,
// recursively, sorted by path; hidden files and folders skipped, symlinked
// folders not followed); or a glob (`*`, `?`, `[...]`, `**` for any depth,
// a trailing `**` for every file below; wildcards skip hidden names unless
// the pattern starts with '.'), sorted. A path that exists is taken
// literally even if it contains wildcard characters. Specs keep their
// order; a file named by two specs is listed twice. The type comes from the
// extension (.txt/.text/no known extension: text; .jsonl/.json/.ndjson:
// JSONL; .bin: llm.c tokens when its first int32 is an llm.c magic, else
// nanoGPT tokens; an outer .gz or .zst/.zstd selects the decompressor)
// unless `forced` names the type (the compression still comes from the
// extension). A token file's header or
// size is checked here, so that a bad one fails before any work is done
// (token_file_layout). Fails naming `key` and the spec when a spec matches
// no file (`KEY: 'SPEC' matches no file`), and naming the file when it
// cannot be read (`PATH: cannot read: REASON (KEY)`, also for a dangling
// symlink) or a spec is neither a regular file nor a folder.
std::vector<InputFile> expand_inputs(const std::vector<std::string>& specs, std::optional<FileType> forced,
                                     const std::string& key);

// The decompressed bytes of one file, read in chunks. A .gz may hold several
// members (`cat a.gz b.gz`), a .zst several frames. A truncated or corrupt
// .gz/.zst (an empty one included) fails naming the file and the compressed
// offset: `PATH: truncated or corrupt gzip stream at compressed byte N (WHY)`.
class ByteStream {
 public:
  explicit ByteStream(const InputFile& file);
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;
  // Up to n bytes into buf; 0 at the end of the file.
  size_t read(char* buf, size_t n);
  uint64_t compressed_bytes_read() const;  // for progress: bytes of the file on disk consumed
  uint64_t bytes_out() const;  // decompressed bytes returned so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct DocumentOptions {
  DocSeparator separator = DocSeparator::kLine;  // for text files
  std::string text_key = "text";  // for JSONL files
  OnBadDocument on_bad = OnBadDocument::kError;
};

// Documents of one file, in order. Text: separator kLine gives each
// non-empty line (a trailing '\r' dropped); kBlankLine gives paragraphs
// (runs of lines up to a blank line, i.e. one of only spaces and tabs; inner
// newlines kept, '\r's dropped); kFile gives the whole file as one document
// (if non-empty), bytes as they are. JSONL: each non-blank line is a JSON
// object whose `text_key` member is a string (newlines inside it are part
// of the document); an empty string is no document (and not a bad one).
// Every document is checked to be valid UTF-8. Lines may be of any length.
// Bad input (a JSONL line that is not JSON, not an object, lacks the key or
// holds a non-string there; invalid UTF-8) fails with one line naming
// file:line (`PATH:LINE: not valid JSON (...)`, `PATH:LINE: no string member
// "text" (set data.text_key)`), for UTF-8 the byte offset in the
// decompressed file (`PATH: invalid UTF-8 at byte N (line L)`), or, with
// OnBadDocument::kSkip, is skipped and counted (a paragraph with a bad line
// is skipped whole, as one).
class DocumentReader {
 public:
  DocumentReader(const InputFile& file, const DocumentOptions& options);
  ~DocumentReader();
  // The next document into *doc; false at the end of the file.
  bool next(std::string* doc);
  int64_t documents_read() const;  // documents returned so far
  int64_t line_number() const;  // the line (from 1) the last document ends on
  int64_t skipped() const;  // bad documents skipped (kSkip)
  const std::string& first_skipped() const;  // why the first of them was ("": none)
  uint64_t compressed_bytes_read() const;
  uint64_t bytes_read() const;  // decompressed bytes consumed so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ggtrain::corpus
