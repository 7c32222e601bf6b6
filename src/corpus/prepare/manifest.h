#pragma once
// The record of a prepared corpus (DIR/manifest.json): where its documents
// came from (each source's size, modification time and a sampled content
// hash), how they were tokenized (the tokenizer's fingerprint, BOS/EOS,
// separators, split rule), and the shards written so far with the input
// position each one ends at, so an interrupted preparation continues after
// its last finished shard and a training run can tell when the sources
// changed under it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "corpus/input/documents.h"
#include "corpus/prepare/window_packer.h"

namespace ggtrain::corpus {

struct SourceRecord {
  std::string path;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t sample_hash = 0;  // FNV-1a of the first and last MiB and the size
  bool validation = false;  // from data.val_corpus: every document is validation
};

struct ShardRecord {
  std::string train_file, val_file;  // relative to the manifest's folder
  int64_t train_tokens = 0, val_tokens = 0, documents = 0;
  // Records packed into windows: the flags beside each token file (as
  // long as it) and what packing this shard did; empty for text.
  std::string train_flags_file, val_flags_file;
  std::optional<PackCounts> packed;
  // The input position after the shard's last document: source index and
  // documents read from that source (index = number of sources: the end).
  int64_t end_source = 0, end_documents_in_source = 0;
};

struct Manifest {
  static constexpr const char* kFormat = "ggtrain-data/1";
  std::string options;  // the preparation options as canonical JSON text
  std::string tokenizer_fingerprint;
  int64_t vocab = 0;
  std::vector<SourceRecord> sources;
  std::vector<ShardRecord> shards;
  bool complete = false;
  int64_t documents = 0, skipped = 0, train_tokens = 0, val_tokens = 0;
  // data.on_bad_document = "skip": why the first skipped document, and the
  // first skipped record, were (each "FILE:LINE: ..."; "": none), so that a
  // preparation says what it left out.
  std::string first_skipped, first_bad_record;
  uint64_t bytes = 0;
  std::optional<PackCounts> packed;  // the shards' packing summed (records only)

  // The shard files that hold tokens, in order, and their flags files
  // (records only: empty for text).
  std::vector<std::string> train_paths(const std::string& dir) const;
  std::vector<std::string> val_paths(const std::string& dir) const;
  std::vector<std::string> train_flag_paths(const std::string& dir) const;
  std::vector<std::string> val_flag_paths(const std::string& dir) const;
  // Adds a finished shard's counts to the totals.
  void count(const ShardRecord& s);
  // The totals anew from the shards (what a read manifest's totals are: a
  // file's own totals are not trusted).
  void recount();
};

std::string manifest_path(const std::string& dir);
// nullopt when DIR has no manifest; Error naming the file and the field
// when it is not one this version reads.
std::optional<Manifest> read_manifest(const std::string& dir);
void write_manifest(const std::string& dir, const Manifest& m);  // atomic

SourceRecord describe_source(const InputFile& f, bool validation);
// The first source whose size, time or sampled content differs from the
// file on disk now (a path that is gone counts), or nullopt. A file whose
// time changed but whose size and sampled content did not is unchanged
// (e.g. copied or touched).
std::optional<std::string> changed_source(const std::vector<SourceRecord>& recorded);

}  // namespace ggtrain::corpus
