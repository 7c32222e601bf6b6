#include "corpus/prepare/document_cursor.h"

#include "util/error.h"

namespace ggtrain::corpus {

DocumentCursor::DocumentCursor(const std::vector<InputFile>& files, const DocumentOptions& o, TokenVocab vocab,
                               int64_t source, int64_t skip, RecordEncoder* records)
    : files_(files), options_(o), vocab_(vocab), source_(source), records_(records) {
  for (int64_t i = 0; i < source && i < int64_t(files.size()); ++i) done_bytes_ += files[size_t(i)].size;
  open();
  Document doc;
  while (open_now() && documents_in_source() < skip)
    if (!read(&doc))
      fail("{}: has fewer documents than the manifest recorded ({})", files_[size_t(source_)].path, skip);
}

bool DocumentCursor::next(Document* doc) {
  while (open_now()) {
    if (read(doc)) {
      if (doc->pretokenized || doc->text.find_first_not_of(" \t\r\n\v\f") != std::string::npos) return true;
      continue;
    }
    skipped_ += text_ ? text_->skipped() : 0;
    if (first_skipped_.empty() && text_) first_skipped_ = text_->first_skipped();
    done_bytes_ += files_[size_t(source_)].size;
    ++source_;
    open();
  }
  return false;
}

int64_t DocumentCursor::documents_in_source() const {
  return text_ ? text_->documents_read() : tokens_ ? tokens_->documents_read() : 0;
}

uint64_t DocumentCursor::bytes_read() const {
  return done_bytes_ + (text_ ? text_->compressed_bytes_read() : tokens_ ? tokens_->compressed_bytes_read() : 0);
}

void DocumentCursor::open() {
  text_.reset();
  tokens_.reset();
  if (source_ >= int64_t(files_.size())) return;
  const InputFile& f = files_[size_t(source_)];
  if (is_pretokenized(f.type)) tokens_ = std::make_unique<TokenDocumentReader>(f, vocab_.size, vocab_.eos);
  else text_ = std::make_unique<DocumentReader>(f, options_);
}

// The open source's next document as it is; false at its end.
bool DocumentCursor::read(Document* doc) {
  doc->pretokenized = tokens_ != nullptr;
  doc->source = source_;
  if (tokens_) return tokens_->next(&doc->tokens);
  if (!text_->next(&doc->text)) return false;
  doc->line = text_->line_number();
  if (records_) records_->look(source_, doc->text);
  return true;
}

}  // namespace ggtrain::corpus
