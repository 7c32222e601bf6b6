#include "corpus/prepare/shard_set.h"

#include <fmt/format.h>

#include "util/error.h"

namespace ggtrain::corpus {

// The open shard's files, and for records the packers filling them.
struct ShardSet::Open {
  TokenFileWriter train, val;
  std::optional<TokenFileWriter> train_flags, val_flags;
  std::optional<WindowPacker> train_packer, val_packer;
  PackCounts counts;

  Open(const std::string& dir, const ShardRecord& r, int64_t vocab, const ShardLayout& layout)
      : train(dir + "/" + r.train_file, vocab), val(dir + "/" + r.val_file, vocab) {
    if (!layout.packing) return;
    train_flags.emplace(dir + "/" + r.train_flags_file, 4);
    val_flags.emplace(dir + "/" + r.val_flags_file, 4);
    train_packer.emplace(train, *train_flags, *layout.packing, layout.pad);
    val_packer.emplace(val, *val_flags, *layout.packing, layout.pad);
  }
};

ShardSet::ShardSet(const std::string& dir, const ShardLayout& layout, Manifest& m)
    : dir_(dir), layout_(layout), m_(m) {}

ShardSet::~ShardSet() = default;

void ShardSet::add(const EncodedBatch& b) {
  // A full shard closes when more documents come, so the last one is
  // closed by finish(), which ends a packed stream.
  if (open_ && open_->train.size() >= layout_.shard_tokens) close(false);
  if (!open_) open_next();
  if (layout_.packing) add_records(b);
  else add_text(b);
  current_.documents += int64_t(b.to_val.size());
  current_.end_source = b.end_source;
  current_.end_documents_in_source = b.end_documents_in_source;
}

void ShardSet::add_text(const EncodedBatch& b) {
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    TokenFileWriter& w = b.to_val[i] ? open_->val : open_->train;
    w.append(b.tokens[i].data(), b.tokens[i].size());
  }
}

void ShardSet::add_records(const EncodedBatch& b) {
  PackCounts& c = open_->counts;
  for (size_t i = 0; i < b.examples.size(); ++i) {
    if (!b.errors[i].empty()) {
      if (!layout_.skip_bad) throw Error(b.errors[i]);
      ++c.bad_skipped;
      if (m_.first_bad_record.empty()) m_.first_bad_record = b.errors[i];
      continue;
    }
    const bool val = b.to_val[i];
    if ((val ? *open_->val_packer : *open_->train_packer).add(b.examples[i], c)) ++(val ? c.val_examples : c.examples);
  }
}

void ShardSet::finish() {
  if (!open_) {
    if (!m_.shards.empty()) return;
    open_next();
  }
  close(true);
}

int64_t ShardSet::open_tokens() const { return open_ ? open_->train.size() + open_->val.size() : 0; }

void ShardSet::open_next() {
  const size_t k = m_.shards.size();
  current_ = ShardRecord{};
  current_.train_file = fmt::format("train-{:05}.tok", k);
  current_.val_file = fmt::format("val-{:05}.tok", k);
  if (layout_.packing) {
    current_.train_flags_file = fmt::format("train-{:05}.flags.tok", k);
    current_.val_flags_file = fmt::format("val-{:05}.flags.tok", k);
  }
  open_ = std::make_unique<Open>(dir_, current_, m_.vocab, layout_);
}

void ShardSet::close(bool last) {
  Open& o = *open_;
  if (layout_.packing) {
    PackCounts& c = o.counts;
    c.train_windows = o.train_packer->flush(c);
    c.val_windows = o.val_packer->flush(c);
    if (last) {
      // The last window's last target: the streams end one token past it.
      const PackCounts before = m_.packed.value_or(PackCounts{});
      end_packed_stream(o.train, *o.train_flags, layout_.pad);
      if (before.val_windows + c.val_windows > 0) end_packed_stream(o.val, *o.val_flags, layout_.pad);
    }
    current_.packed = c;
    o.train_flags->commit();
    o.val_flags->commit();
  }
  current_.train_tokens = o.train.size();
  current_.val_tokens = o.val.size();
  o.train.commit();
  o.val.commit();
  open_.reset();
  m_.shards.push_back(current_);
  m_.count(current_);
  write_manifest(dir_, m_);  // the shard is finished: a re-run starts after it
}

}  // namespace ggtrain::corpus
