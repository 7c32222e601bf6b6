#include "corpus/prepare/prepare.h"

#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "corpus/prepare/document_cursor.h"
#include "corpus/prepare/progress.h"
#include "corpus/prepare/shard_set.h"
#include "corpus/token_file.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/rng.h"

namespace ggtrain::corpus {

namespace fs = std::filesystem;

std::string tokenizer_fingerprint(const tokenizer::Tokenizer& tok) {
  uint64_t h = fnv1a(tok.model().data(), tok.model().size());
  const int32_t special[4] = {tok.bos_id(), tok.eos_id(), tok.unk_id(), tok.add_space_prefix() ? 1 : 0};
  h = fnv1a(special, sizeof special, h);
  for (int32_t i = 0; i < int32_t(tok.vocab_size()); ++i) {
    const auto& p = tok.piece(i);
    const int32_t type = tok.token_type(i);
    h = fnv1a(p.data(), p.size() + 1, h);  // with the terminating NUL: pieces stay apart
    h = fnv1a(&type, sizeof type, h);
  }
  return fmt::format("{:016x}", h);
}

namespace {

const char* separator_name(DocSeparator s) {
  return s == DocSeparator::kLine ? "line" : s == DocSeparator::kBlankLine ? "blank_line" : "file";
}

// Everything besides the sources and the tokenizer that decides the shards'
// content, as canonical JSON (the manifest compares it as text).
std::string options_json(const PrepareOptions& o) {
  nlohmann::json j{{"file_type", o.file_type ? file_type_name(*o.file_type) : ""},
                   {"doc_separator", separator_name(o.documents.separator)},
                   {"text_key", o.documents.text_key},
                   {"on_bad_document", o.documents.on_bad == OnBadDocument::kSkip ? "skip" : "error"},
                   {"add_bos", o.add_bos},
                   {"add_eos", o.add_eos},
                   {"val_fraction", o.val_corpus.empty() ? o.val_fraction : 0.0},
                   {"seed", o.seed},
                   {"shard_tokens", o.shard_tokens}};
  if (o.records) {  // text data's options stay as they were, so its prepared shards are reused
    j["records"] = nlohmann::json::parse(o.records->options_json());
    j["packing"] = {{"seq_len", o.packing.seq_len}, {"overflow", int(o.packing.overflow)}};
  }
  return j.dump();
}

struct Inputs {
  std::vector<InputFile> files;
  std::vector<SourceRecord> records;
};

Inputs expand_all(const PrepareOptions& o) {
  Inputs in;
  in.files = expand_inputs(o.corpus, o.file_type, "data.corpus");
  for (const auto& f : in.files) in.records.push_back(describe_source(f, false));
  if (!o.val_corpus.empty()) {
    for (auto& f : expand_inputs(o.val_corpus, o.file_type, "data.val_corpus")) {
      in.records.push_back(describe_source(f, true));
      in.files.push_back(std::move(f));
    }
  }
  return in;
}

bool same_source_list(const std::vector<SourceRecord>& a, const std::vector<SourceRecord>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].path != b[i].path || a[i].validation != b[i].validation) return false;
  return true;
}

// The size a token file of n tokens has: a shard that is missing or not
// this size is prepared again.
bool shard_intact(const std::string& path, int64_t n, int64_t vocab) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return !ec && size == uint64_t(32 + n * (vocab <= 65536 ? 2 : 4));
}

// What fills a packed window's rest: EOS, else BOS.
int32_t padding_token(const tokenizer::Tokenizer& tok) { return tok.eos_id() >= 0 ? tok.eos_id() : tok.bos_id(); }

// Text documents become BOS + text + EOS (as add_bos/add_eos say).
// Pretokenized documents are moved over as they are: their end-of-text
// tokens are already in the stream, so add_bos/add_eos do not apply.
void encode_text(std::vector<Document>& docs, EncodedBatch& b, const tokenizer::Tokenizer& tok,
                 const PrepareOptions& o) {
  b.tokens.resize(docs.size());
  const int32_t eos = tok.eos_id();
#pragma omp parallel for schedule(dynamic, 8)
  for (size_t i = 0; i < docs.size(); ++i) {
    Document& d = docs[i];
    if (d.pretokenized) {
      b.tokens[i] = std::move(d.tokens);
      continue;
    }
    b.tokens[i] = tok.encode(d.text, o.add_bos);
    if (o.add_eos && eos >= 0) b.tokens[i].push_back(eos);
  }
}

// Records become their examples; a bad one keeps its message (the shards
// fail on it or count it, in input order).
void encode_records(const std::vector<Document>& docs, EncodedBatch& b, const RecordEncoder& records,
                    const std::vector<InputFile>& files) {
  b.examples.assign(docs.size(), {});
  b.errors.assign(docs.size(), "");
  std::exception_ptr broken;  // anything but a bad record: rethrown as it is
#pragma omp parallel for schedule(dynamic, 8)
  for (size_t i = 0; i < docs.size(); ++i) {
    const Document& d = docs[i];
    try {
      b.examples[i] = records.encode(d.source, d.text, fmt::format("{}:{}", files[size_t(d.source)].path, d.line));
    } catch (const Error& e) {
      b.errors[i] = e.what();
    } catch (...) {
#pragma omp critical
      broken = std::current_exception();
    }
  }
  if (broken) std::rethrow_exception(broken);
}

// Tokenizes from the end of the manifest's last shard to the end of the
// inputs, shard by shard.
void run_pipeline(const Inputs& in, const PrepareOptions& o, const tokenizer::Tokenizer& tok, const std::string& dir,
                  Manifest& m) {
  const int64_t start_source = m.shards.empty() ? 0 : m.shards.back().end_source;
  const int64_t start_docs = m.shards.empty() ? 0 : m.shards.back().end_documents_in_source;
  DocumentCursor cursor(in.files, o.documents, TokenVocab{tok.vocab_size(), tok.eos_id()}, start_source, start_docs,
                        o.records.get());
  ShardLayout layout{o.shard_tokens, std::nullopt, padding_token(tok), o.documents.on_bad == OnBadDocument::kSkip};
  if (o.records) layout.packing = o.packing;
  ShardSet shards(dir, layout, m);
  uint64_t total = 0;
  for (const auto& f : in.files) total += f.size;
  ProgressLine progress("preparing " + dir, total, o.quiet);
  int64_t corpus_docs = 0;  // index of the next corpus document, for the split
  for (const auto& s : m.shards) corpus_docs += s.documents;
  const int64_t batch_bytes = std::min(o.batch_bytes, std::max<int64_t>(o.shard_tokens, 64 << 10));
  std::vector<Document> docs;
  EncodedBatch b;
  for (bool more = true; more;) {
    docs.clear();
    b.to_val.clear();
    int64_t bytes = 0;
    Document doc;
    // Both kinds of document take the same split rule, so a pretokenized
    // corpus resumes by (source, documents in it) as a text one does.
    while (bytes < batch_bytes && (more = cursor.next(&doc))) {
      const bool val = cursor.validation_source(in.records) ||
                       (o.val_corpus.empty() && goes_to_validation(o.seed, corpus_docs, o.val_fraction));
      bytes += doc.bytes();
      docs.push_back(std::move(doc));
      b.to_val.push_back(val);
      ++corpus_docs;
    }
    b.end_source = cursor.source();
    b.end_documents_in_source = cursor.documents_in_source();
    if (docs.empty()) break;
    if (o.records) encode_records(docs, b, *o.records, in.files);
    else encode_text(docs, b, tok, o);
    shards.add(b);
    m.skipped = cursor.skipped();
    if (m.first_skipped.empty()) m.first_skipped = cursor.first_skipped();
    progress.update(cursor.bytes_read(), m.documents + shards.open_documents(),
                    m.train_tokens + m.val_tokens + shards.open_tokens());
  }
  m.skipped = cursor.skipped();
  if (m.first_skipped.empty()) m.first_skipped = cursor.first_skipped();
  m.bytes = total;
  shards.finish();
  m.complete = true;
  write_manifest(dir, m);
  progress.finish(total, m.documents, m.train_tokens + m.val_tokens);
}

void remove_shards(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if ((name.rfind("train-", 0) == 0 || name.rfind("val-", 0) == 0) && name.find(".tok") != std::string::npos)
      fs::remove(e.path(), ec);
  }
}

// Keeps the manifest's shards up to the first one that is missing or cut
// short (it and the rest are prepared again, deterministically).
void drop_damaged_shards(Manifest& m, const std::string& dir, bool quiet) {
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const auto& s = m.shards[i];
    if (shard_intact(dir + "/" + s.train_file, s.train_tokens, m.vocab) &&
        shard_intact(dir + "/" + s.val_file, s.val_tokens, m.vocab) &&
        (!s.packed || (shard_intact(dir + "/" + s.train_flags_file, s.train_tokens, 4) &&  // flags: 4 values
                       shard_intact(dir + "/" + s.val_flags_file, s.val_tokens, 4))))
      continue;
    if (!quiet)
      fmt::print(stderr, "{}/{} or {} is missing or truncated: preparing from shard {} again\n", dir, s.train_file,
                 s.val_file, i);
    m.shards.resize(i);
    m.complete = false;
    m.recount();
    return;
  }
}

}  // namespace

bool goes_to_validation(uint64_t seed, int64_t index, double fraction) {
  Rng h(seed ^ (0xd1b54a32d192ed03ULL * uint64_t(index + 1)));
  return h.uniform() < fraction;
}

PreparedData prepare_data(const PrepareOptions& o, const tokenizer::Tokenizer& tok, const std::string& dir,
                          OnMismatch on_mismatch) {
  if (o.shard_tokens < 1) fail("data.shard_tokens must be at least 1, got {}", o.shard_tokens);
  if (o.records && o.packing.seq_len < 2) fail("windows of {} tokens are too short to pack records", o.packing.seq_len);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the data folder: {}", dir, ec.message());
  const Inputs in = expand_all(o);
  Manifest fresh;
  fresh.options = options_json(o);
  fresh.tokenizer_fingerprint = tokenizer_fingerprint(tok);
  fresh.vocab = tok.vocab_size();
  fresh.sources = in.records;

  auto m = read_manifest(dir);
  if (m) {
    std::string why;
    if (m->options != fresh.options)
      why = "the data options differ (" + m->options + " then, " + fresh.options + " now)";
    else if (m->tokenizer_fingerprint != fresh.tokenizer_fingerprint) why = "the tokenizer differs";
    else if (!same_source_list(m->sources, fresh.sources)) why = "data.corpus / data.val_corpus name other files";
    else if (auto changed = changed_source(m->sources)) why = "a source changed: " + *changed;
    if (!why.empty() && on_mismatch == OnMismatch::kRefuse)
      fail("{}: {} since this data was prepared; the run cannot resume on other data (train a new run, "
           "or restore the sources)",
           manifest_path(dir), why);
    if (!why.empty()) {
      if (!o.quiet) fmt::print(stderr, "{}: {}: preparing the data again\n", manifest_path(dir), why);
      m.reset();
    }
  }
  if (m) drop_damaged_shards(*m, dir, o.quiet);
  PreparedData out;
  if (m && m->complete) {
    out.reused = true;
  } else {
    if (!m) {
      remove_shards(dir);
      m = fresh;
    } else if (!o.quiet) {
      fmt::print(stderr, "{}: continuing after {} finished shard(s)\n", manifest_path(dir), m->shards.size());
    }
    run_pipeline(in, o, tok, dir, *m);
  }
  out.manifest = *m;
  out.train_shards = m->train_paths(dir);
  out.val_shards = m->val_paths(dir);
  out.train_flags = m->train_flag_paths(dir);
  out.val_flags = m->val_flag_paths(dir);
  return out;
}

namespace {

// The text sources of `files`. Pretokenized ones have no text to sample; a
// corpus of only those cannot train a tokenizer, and its ids only mean
// something with the vocabulary they were made with.
std::vector<InputFile> text_sources(const std::vector<InputFile>& files) {
  std::vector<InputFile> text;
  for (const auto& f : files)
    if (!is_pretokenized(f.type)) text.push_back(f);
  if (text.empty() && !files.empty())
    fail("data.corpus: every source is pretokenized (llm.c or nanoGPT .bin, e.g. {}): pretokenized sources need "
         "data.tokenizer (a GGUF with the vocabulary the tokens were made with)",
         files.front().path);
  return text;
}

}  // namespace

int64_t write_text_sample(const PrepareOptions& o, const std::string& out_path, int64_t max_lines) {
  const std::vector<InputFile> files = text_sources(expand_all(o).files);
  DocumentCursor cursor(files, o.documents, TokenVocab{}, 0, 0);
  std::vector<std::string> kept;
  Rng rng(o.seed ^ 0x5eed5a3b1e000001ULL);
  int64_t seen = 0;
  Document d;
  while (cursor.next(&d)) {
    const std::string& doc = d.text;
    for (size_t pos = 0; pos < doc.size();) {
      size_t end = doc.find('\n', pos);
      if (end == std::string::npos) end = doc.size();
      if (doc.find_first_not_of(" \t\r\v\f", pos) < end) {  // reservoir sampling (Algorithm R)
        std::string line = doc.substr(pos, end - pos);
        if (int64_t(kept.size()) < max_lines) kept.push_back(std::move(line));
        else if (const uint64_t j = rng.next_u64() % uint64_t(seen + 1); j < uint64_t(max_lines))
          kept[size_t(j)] = std::move(line);
        ++seen;
      }
      pos = end + 1;
    }
  }
  AtomicFileWriter w(out_path);
  for (const auto& line : kept) {
    w.write(line.data(), line.size());
    w.write("\n", 1);
  }
  w.commit();
  return int64_t(kept.size());
}

}  // namespace ggtrain::corpus
