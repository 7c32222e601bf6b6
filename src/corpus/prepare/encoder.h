#pragma once
// Records instead of text: how a corpus whose documents are records (chat,
// instruction and preference data, one JSON object per line) becomes
// examples. The preparation pipeline reads, splits, shards and records them
// as it does text (corpus/prepare/prepare.h); an encoder (chat/ has the
// one for chat records) only turns one record into its examples, which are
// then packed whole into windows (corpus/prepare/window_packer.h).
#include <cstdint>
#include <string>
#include <vector>

#include "corpus/prepare/window_packer.h"

namespace ggtrain::corpus {

class RecordEncoder {
 public:
  virtual ~RecordEncoder() = default;
  // Everything besides the sources, the tokenizer and the packing that
  // decides the examples, as JSON text: the manifest records it, and data
  // made with other options is prepared again.
  virtual std::string options_json() const = 0;
  // Every record of source `source` in reading order, before any of them is
  // encoded (e.g. to take a file's record format from its first record).
  // Called from one thread; never fails (encode reports bad records).
  virtual void look(int64_t source, const std::string& record) = 0;
  // The record's examples: one, or several that share a window side by side
  // (a preference pair). Called from several threads at once. A bad record
  // is an Error naming `where` (file:line) and what is wrong.
  virtual std::vector<Example> encode(int64_t source, const std::string& record, const std::string& where) const = 0;
};

}  // namespace ggtrain::corpus
