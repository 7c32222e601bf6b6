// Fuzz target: the corpus document reader (data/input): text and JSONL,
// plain, gzip or zstd. The input's first byte picks the file type, the
// compression, the text separator and the bad-document policy; the rest is
// the file. Every document returned must be non-empty valid UTF-8, and the
// reader's count must match; everything else must be rejected with a
// ggtrain::Error.
#include "corpus/input/documents.h"
#include "fuzz_util.h"
#include "util/error.h"
#include "util/utf8.h"

using namespace ggtrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static ggtrain_fuzz::MemFile file;
  const uint8_t mode = data[0];
  corpus::InputFile f;
  f.path = file.write(data + 1, size - 1);
  f.type = mode & 1 ? corpus::FileType::kJsonl : corpus::FileType::kText;
  f.compression = corpus::Compression((mode >> 1) % 3);
  f.size = size - 1;
  corpus::DocumentOptions o;
  o.separator = corpus::DocSeparator((mode >> 3) % 3);
  o.on_bad = mode & 0x20 ? corpus::OnBadDocument::kSkip : corpus::OnBadDocument::kError;
  try {
    corpus::DocumentReader reader(f, o);
    std::string doc;
    int64_t n = 0;
    uint64_t bytes = 0;
    while (reader.next(&doc)) {
      if (doc.empty()) ggtrain_fuzz::finding("empty document returned");
      if (!valid_utf8(doc)) ggtrain_fuzz::finding("invalid UTF-8 returned");
      ++n;
      bytes += doc.size();
    }
    if (n != reader.documents_read()) ggtrain_fuzz::finding("documents_read() differs from the documents returned");
    ggtrain_fuzz::sink(bytes);
  } catch (const Error&) {
  }
  return 0;
}
