#pragma once
// Streaming corpus preparation: documents are read from the inputs in
// order, tokenized in parallel in batches of a few MB (BOS + text + EOS by
// default; documents of pretokenized llm.c/nanoGPT files are copied as they
// are; records, e.g. chat examples, are encoded by a RecordEncoder and
// packed whole into windows), split between training and validation per
// document, and appended to shard files of about `shard_tokens` training
// tokens each (DIR/train-NNNNN.tok, DIR/val-NNNNN.tok, and for records
// their .flags.tok: corpus/prepare/shard_set.h). Memory stays bounded by the
// batch, whatever the corpus size. DIR/manifest.json records every finished
// shard, so an interrupted preparation continues after the last one, and a
// later run reuses complete data whose sources and options are unchanged.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "corpus/input/documents.h"
#include "corpus/prepare/encoder.h"
#include "corpus/prepare/manifest.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::corpus {

struct PrepareOptions {
  std::vector<std::string> corpus;  // files, folders, globs
  std::vector<std::string> val_corpus;  // a separate validation set (then val_fraction is unused)
  std::optional<FileType> file_type;  // nullopt: by extension
  DocumentOptions documents;
  bool add_bos = true, add_eos = true;  // text documents only
  // Records instead of text: each document (a line; the inputs read as text
  // lines) becomes examples through `records`, packed whole into windows
  // (`packing`); a bad record fails or, with documents.on_bad = kSkip, is
  // counted (Manifest::packed). Null: text.
  std::shared_ptr<RecordEncoder> records;
  WindowPacking packing;
  // A document is validation when a hash of (seed, its index among the
  // corpus documents) falls under val_fraction: deterministic, spread over
  // the whole corpus, independent of batch and shard sizes.
  double val_fraction = 0.01;
  uint64_t seed = 1337;
  int64_t shard_tokens = 100'000'000;
  // Text tokenized at once: at most 8 MiB, and no more than about a
  // quarter of a shard (a token is ~4 bytes of text), so shards end close to
  // shard_tokens.
  int64_t batch_bytes = 8 << 20;
  bool quiet = false;
};

// Whether document `index` of a corpus goes to validation (PrepareOptions::
// val_fraction): a hash of (seed, index), the same for any batching.
bool goes_to_validation(uint64_t seed, int64_t index, double fraction);

// What to do when a manifest's sources or options no longer match.
enum class OnMismatch { kPrepareAgain, kRefuse };

struct PreparedData {
  std::vector<std::string> train_shards, val_shards;
  std::vector<std::string> train_flags, val_flags;  // records: beside each shard (corpus/batch_loader.h flags)
  Manifest manifest;
  bool reused = false;  // complete data found, nothing tokenized
};

PreparedData prepare_data(const PrepareOptions& o, const tokenizer::Tokenizer& tok, const std::string& dir,
                          OnMismatch on_mismatch);

// A hash of everything that decides token ids: vocabulary pieces and types,
// special ids, the tokenizer type and its space prefix.
std::string tokenizer_fingerprint(const tokenizer::Tokenizer& tok);

// The documents of `o` (corpus then val_corpus) in order, up to max_bytes of
// text written to `out_path` one line per text line (for sentencepiece):
// every document while they fit, then a seeded uniform sample of lines
// (reservoir). Pretokenized sources are left out; when every source is
// one, fails: they need data.tokenizer. Returns the number of lines written.
int64_t write_text_sample(const PrepareOptions& o, const std::string& out_path, int64_t max_lines);

}  // namespace ggtrain::corpus
