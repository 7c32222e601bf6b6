#pragma once
// The shards a preparation writes (DIR/train-NNNNN.tok, DIR/val-NNNNN.tok,
// and for records their .flags.tok): documents are appended to the open
// pair until its training file holds shard_tokens, then it is committed and
// recorded in the manifest, so a preparation killed at any point continues
// after its last finished shard. Records are packed into windows, and every
// shard closes with no window open, so a shard boundary is a window
// boundary and the shards read as one stream.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "corpus/prepare/manifest.h"
#include "corpus/prepare/window_packer.h"
#include "corpus/token_file.h"

namespace ggtrain::corpus {

// One batch of documents as encoded, in input order, and where each goes.
struct EncodedBatch {
  std::vector<char> to_val;
  std::vector<std::vector<int32_t>> tokens;  // text: each document's ids
  std::vector<std::vector<Example>> examples;  // records: each record's examples
  std::vector<std::string> errors;  // records: why one is bad ("" when it is not)
  int64_t end_source = 0, end_documents_in_source = 0;  // the input position after the batch
};

struct ShardLayout {
  int64_t shard_tokens = 0;
  std::optional<WindowPacking> packing;  // records; nullopt: text
  int32_t pad = 0;  // the padding token of packed windows
  bool skip_bad = false;  // a bad record is counted and left out, instead of failing
};

class ShardSet {
 public:
  ShardSet(const std::string& dir, const ShardLayout& layout, Manifest& m);
  ~ShardSet();
  void add(const EncodedBatch& b);
  // Closes the last shard; with none open and no shard at all yet, writes
  // an empty pair so the data set is never without files.
  void finish();
  int64_t open_tokens() const;
  int64_t open_documents() const { return open_ ? current_.documents : 0; }

 private:
  struct Open;
  void open_next();
  void close(bool last);
  void add_text(const EncodedBatch& b);
  void add_records(const EncodedBatch& b);

  std::string dir_;
  ShardLayout layout_;
  Manifest& m_;
  ShardRecord current_;
  std::unique_ptr<Open> open_;
};

}  // namespace ggtrain::corpus
