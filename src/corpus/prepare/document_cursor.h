#pragma once
// The documents of a corpus's inputs in order, across files of every kind
// (text, JSONL, pretokenized), from a position (source, documents already
// read from it): where a preparation starts, or continues after its last
// finished shard.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "corpus/input/documents.h"
#include "corpus/input/token_documents.h"
#include "corpus/prepare/encoder.h"
#include "corpus/prepare/manifest.h"

namespace ggtrain::corpus {

// One document: text to tokenize (or a record to encode), or, from a
// pretokenized source (llm.c, nanoGPT), token ids to copy as they are.
struct Document {
  bool pretokenized = false;
  std::string text;
  std::vector<int32_t> tokens;
  int64_t source = 0, line = 0;  // where it was read, for messages
  // What it holds in memory, for the batch size.
  int64_t bytes() const { return pretokenized ? int64_t(tokens.size() * sizeof(int32_t)) : int64_t(text.size()); }
};

// What a pretokenized source is read with: its ids are checked against the
// vocabulary and split into documents at its EOS id.
struct TokenVocab {
  int64_t size = 0;
  int32_t eos = -1;
};

class DocumentCursor {
 public:
  // `records`: shown every document read, in order (RecordEncoder::look).
  DocumentCursor(const std::vector<InputFile>& files, const DocumentOptions& o, TokenVocab vocab, int64_t source,
                 int64_t skip, RecordEncoder* records = nullptr);
  // The next document that is not only white space; false at the end of
  // the last file.
  bool next(Document* doc);
  int64_t source() const { return source_; }
  int64_t documents_in_source() const;
  bool validation_source(const std::vector<SourceRecord>& r) const { return r[size_t(source_)].validation; }
  uint64_t bytes_read() const;
  int64_t skipped() const { return skipped_ + (text_ ? text_->skipped() : 0); }
  // Why the first skipped document was ("FILE: ... (line N)"; "": none).
  std::string first_skipped() const {
    return !first_skipped_.empty() || !text_ ? first_skipped_ : text_->first_skipped();
  }

 private:
  bool open_now() const { return text_ || tokens_; }
  void open();
  bool read(Document* doc);

  const std::vector<InputFile>& files_;
  DocumentOptions options_;
  TokenVocab vocab_;
  int64_t source_;
  RecordEncoder* records_;
  std::unique_ptr<DocumentReader> text_;  // the open source, when it is text
  std::unique_ptr<TokenDocumentReader> tokens_;  // or when it is pretokenized
  uint64_t done_bytes_ = 0;
  int64_t skipped_ = 0;
  std::string first_skipped_;  // of the files already read
};

}  // namespace ggtrain::corpus
