// Pretokenized corpus files as data.corpus sources: llm.c .bin shards
// (256-int32 header) and nanoGPT train.bin/val.bin (raw uint16), read with
// the vocabulary they were made with (here the tiny-gpt2 fixture: 300
// tokens, <|endoftext|> = 299 is BOS and EOS). The token stream is split
// into documents at EOS, copied as it is, split between train and val per
// document like text, and resumes like text; every bad header, size or id
// fails naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "corpus/input/token_documents.h"
#include "corpus/prepare/prepare.h"
#include "corpus/token_file.h"
#include "gguf/reader.h"
#include "support/files.h"
#include "support/prepare_options.h"
#include "support/run_helpers.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace ggtrain;
using corpus::FileType;
using corpus::InputFile;
using test_support::TempDir;
namespace fs = std::filesystem;

using ggtrain::test_support::error_of;
using ggtrain::test_support::slurp;
using ggtrain::test_support::spit;

namespace {

constexpr int32_t kEos = 299;  // <|endoftext|> of tiny-gpt2.gguf
using Tokens = std::vector<int32_t>;
using Docs = std::vector<Tokens>;

std::string fixture(const std::string& name) { return std::string(GGTRAIN_FIXTURES_DIR) + "/" + name; }

const tokenizer::Tokenizer& gpt2_tokenizer() {
  static const tokenizer::Tokenizer t = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(fixture("tiny-gpt2.gguf")));
  return t;
}

void put_le(std::string* out, uint32_t v, int width) {
  for (int i = 0; i < width; ++i) out->push_back(char((v >> (8 * i)) & 0xff));
}

// An llm.c file; `count` (the header's token count) defaults to the truth.
void write_llmc(const std::string& path, const Tokens& tokens, int32_t magic = corpus::kLlmcMagicGpt2,
                int32_t version = 1, int width = 2, int64_t count = -1) {
  std::string b;
  put_le(&b, uint32_t(magic), 4);
  put_le(&b, uint32_t(version), 4);
  put_le(&b, uint32_t(count < 0 ? int64_t(tokens.size()) : count), 4);
  b.resize(1024, '\0');
  for (int32_t t : tokens) put_le(&b, uint32_t(t), width);
  spit(path, b);
}

void write_nanogpt(const std::string& path, const Tokens& tokens) {
  std::string b;
  for (int32_t t : tokens) put_le(&b, uint32_t(t), 2);
  spit(path, b);
}

// `n` documents of 5 to 80 ids below EOS, deterministic per seed.
Docs random_docs(int n, uint64_t seed) {
  Docs docs(static_cast<size_t>(n));
  uint64_t s = seed;
  auto next = [&s] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (auto& d : docs) {
    d.resize(5 + next() % 76);
    for (auto& t : d) t = int32_t(next() % kEos);
  }
  return docs;
}

// llm.c's data scripts put <|endoftext|> before each document, nanoGPT's after.
Tokens llmc_stream(const Docs& docs) {
  Tokens s;
  for (const auto& d : docs) {
    s.push_back(kEos);
    s.insert(s.end(), d.begin(), d.end());
  }
  return s;
}

Tokens nanogpt_stream(const Docs& docs) {
  Tokens s;
  for (const auto& d : docs) {
    s.insert(s.end(), d.begin(), d.end());
    s.push_back(kEos);
  }
  return s;
}

// The rule, written again: up to and including each EOS; the rest is one more.
Docs split_at_eos(const Tokens& stream) {
  Docs docs(1);
  for (int32_t t : stream) {
    docs.back().push_back(t);
    if (t == kEos) docs.emplace_back();
  }
  if (docs.back().empty()) docs.pop_back();
  return docs;
}

Tokens all_tokens(const std::vector<std::string>& shards) {
  if (shards.empty()) return {};
  corpus::TokenStream s(shards);
  Tokens out(size_t(s.size()));
  s.read(0, s.size(), out.data());
  return out;
}

// Which documents went to validation, given that train and val hold the
// documents in order, each wholly in one of them (a test failure if not).
std::vector<bool> placement(const Docs& docs, const Tokens& train, const Tokens& val) {
  std::vector<bool> to_val;
  size_t t = 0, v = 0;
  auto at = [](const Tokens& s, size_t pos, const Tokens& d) {
    return pos + d.size() <= s.size() && std::equal(d.begin(), d.end(), s.begin() + ptrdiff_t(pos));
  };
  for (size_t i = 0; i < docs.size(); ++i) {
    if (at(train, t, docs[i])) {
      t += docs[i].size();
      to_val.push_back(false);
    } else if (at(val, v, docs[i])) {
      v += docs[i].size();
      to_val.push_back(true);
    } else {
      ADD_FAILURE() << "document " << i << " is neither next in train (at " << t << ") nor in val (at " << v << ")";
      return to_val;
    }
  }
  EXPECT_EQ(t, train.size()) << "train holds more than the documents";
  EXPECT_EQ(v, val.size()) << "val holds more than the documents";
  return to_val;
}

corpus::PrepareOptions options(const std::vector<std::string>& corpus, int64_t shard_tokens = int64_t(1) << 40) {
  return test_support::small_batch_options(corpus, 0.2, shard_tokens);
}

corpus::PreparedData prepare(const corpus::PrepareOptions& o, const std::string& dir) {
  return corpus::prepare_data(o, gpt2_tokenizer(), dir, corpus::OnMismatch::kRefuse);
}

InputFile one_file(const std::string& path, std::optional<FileType> forced = std::nullopt) {
  const auto files = corpus::expand_inputs({path}, forced, "data.corpus");
  EXPECT_EQ(files.size(), 1u);
  return files.at(0);
}

Docs read_all(const InputFile& f, int64_t vocab = 300) {
  corpus::TokenDocumentReader r(f, vocab, kEos);
  Docs docs;
  for (Tokens d; r.next(&d);) docs.push_back(d);
  EXPECT_EQ(r.documents_read(), int64_t(docs.size()));
  EXPECT_EQ(r.compressed_bytes_read(), f.size) << "every byte consumed at the end";
  return docs;
}

}  // namespace

TEST(TokenSources, TypeByContentOfDotBin) {
  TempDir tmp;
  write_llmc(tmp / "a.bin", {1, 2, kEos});
  write_llmc(tmp / "l3.bin", {1, 2, kEos}, corpus::kLlmcMagicLlama3, 7, 4);
  write_nanogpt(tmp / "train.bin", {1, 2, kEos});
  spit(tmp / "empty.bin", "");
  EXPECT_EQ(one_file(tmp / "a.bin").type, FileType::kLlmc);
  EXPECT_EQ(one_file(tmp / "l3.bin").type, FileType::kLlmc);
  EXPECT_EQ(one_file(tmp / "train.bin").type, FileType::kNanoGpt);
  EXPECT_EQ(one_file(tmp / "empty.bin").type, FileType::kNanoGpt);
  EXPECT_TRUE(read_all(one_file(tmp / "empty.bin")).empty());
}

TEST(TokenSources, DocumentsEndAtEachEosAndTheRestIsOneMore) {
  TempDir tmp;
  const Tokens stream{kEos, 5, 6, kEos, 7, kEos, kEos, 8, 9};
  write_llmc(tmp / "a.bin", stream);
  write_nanogpt(tmp / "b.bin", stream);
  write_llmc(tmp / "c.bin", stream, corpus::kLlmcMagicLlama3, 7, 4);
  const Docs want{{kEos}, {5, 6, kEos}, {7, kEos}, {kEos}, {8, 9}};
  EXPECT_EQ(read_all(one_file(tmp / "a.bin")), want);
  EXPECT_EQ(read_all(one_file(tmp / "b.bin")), want);
  EXPECT_EQ(read_all(one_file(tmp / "c.bin")), want);
}

// More than one read chunk, and a run without EOS longer than a document
// may be: cut, so memory stays bounded.
TEST(TokenSources, LongStreamsAreReadInChunksAndEndlessDocumentsCut) {
  TempDir tmp;
  Tokens stream(corpus::kMaxDocumentTokens + 10);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = int32_t(i % kEos);
  write_nanogpt(tmp / "long.bin", stream);
  const Docs docs = read_all(one_file(tmp / "long.bin"));
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].size(), corpus::kMaxDocumentTokens);
  EXPECT_EQ(docs[1].size(), 10u);
  EXPECT_EQ(docs[1].back(), int32_t((stream.size() - 1) % kEos));
}

TEST(TokenSources, LlmcAndNanoGptGiveTheirStreamAsTrainAndVal) {
  TempDir tmp;
  const Docs docs = random_docs(400, 7);
  for (const std::string kind : {"llmc", "llmc-uint32", "nanogpt"}) {
    const std::string path = tmp / (kind + ".bin");
    const Tokens stream = kind == "nanogpt" ? nanogpt_stream(docs) : llmc_stream(docs);
    if (kind == "nanogpt") write_nanogpt(path, stream);
    else if (kind == "llmc") write_llmc(path, stream);
    else write_llmc(path, stream, corpus::kLlmcMagicLlama3, 7, 4);
    const auto p = prepare(options({path}, 3000), tmp / ("d-" + kind));
    EXPECT_GE(p.train_shards.size(), 3u) << kind;
    const Tokens train = all_tokens(p.train_shards), val = all_tokens(p.val_shards);
    EXPECT_EQ(train.size() + val.size(), stream.size()) << kind << ": nothing added, nothing lost";
    const Docs want = split_at_eos(stream);
    const auto to_val = placement(want, train, val);
    EXPECT_EQ(p.manifest.documents, int64_t(want.size())) << kind;
    const auto n_val = std::count(to_val.begin(), to_val.end(), true);
    EXPECT_GT(n_val, 40) << kind;
    EXPECT_LT(n_val, 130) << kind;
  }
}

// The split is the text documents' rule: document i of a token file goes
// where line i of a text file goes.
TEST(TokenSources, SplitLikeTextDocumentsOfTheSameIndex) {
  TempDir tmp;
  const int n = 300;
  const Docs docs = random_docs(n, 3);
  write_nanogpt(tmp / "t.bin", nanogpt_stream(docs));
  std::string text;
  for (int i = 0; i < n; ++i) text += fmt::format("w{}\n", i);
  spit(tmp / "t.txt", text);

  const auto p = prepare(options({tmp / "t.bin"}), tmp / "tokens");
  const auto to_val =
      placement(split_at_eos(nanogpt_stream(docs)), all_tokens(p.train_shards), all_tokens(p.val_shards));
  std::set<int> val_tokens;
  for (int i = 0; i < int(to_val.size()); ++i)
    if (to_val[size_t(i)]) val_tokens.insert(i);

  auto o = options({tmp / "t.txt"});
  o.add_bos = false;  // text + EOS: the val stream splits at EOS into the lines
  const auto q = prepare(o, tmp / "text");
  std::set<int> val_text;
  for (const auto& d : split_at_eos(all_tokens(q.val_shards)))
    val_text.insert(std::stoi(gpt2_tokenizer().decode(d).substr(1)));
  EXPECT_EQ(val_tokens, val_text);
  EXPECT_FALSE(val_text.empty());
}

TEST(TokenSources, FileTypeOverride) {
  TempDir tmp;
  const Tokens stream{1, 2, kEos, 3};
  write_nanogpt(tmp / "tokens.u16", stream);
  write_llmc(tmp / "shard.tok", stream);
  EXPECT_EQ(one_file(tmp / "tokens.u16").type, FileType::kText) << "no .bin: text by extension";
  EXPECT_EQ(one_file(tmp / "tokens.u16", FileType::kNanoGpt).type, FileType::kNanoGpt);
  EXPECT_EQ(one_file(tmp / "shard.tok", FileType::kLlmc).type, FileType::kLlmc);
  EXPECT_EQ(read_all(one_file(tmp / "tokens.u16", FileType::kNanoGpt)), (Docs{{1, 2, kEos}, {3}}));
  EXPECT_EQ(read_all(one_file(tmp / "shard.tok", FileType::kLlmc)), (Docs{{1, 2, kEos}, {3}}));
  auto o = options({tmp / "tokens.u16"});
  o.file_type = FileType::kNanoGpt;
  const auto p = prepare(o, tmp / "d");
  EXPECT_EQ(all_tokens(p.train_shards).size() + all_tokens(p.val_shards).size(), stream.size());
  // A text file forced to nanoGPT is read as tokens (and here fails on an id).
  spit(tmp / "a.txt", "hello\n");
  EXPECT_EQ(one_file(tmp / "a.txt", FileType::kNanoGpt).type, FileType::kNanoGpt);
}

TEST(TokenSourcesBad, IdPastTheVocabulary) {
  TempDir tmp;
  write_nanogpt(tmp / "big.bin", {1, 2, kEos, 3, 4, 300, 5});
  EXPECT_EQ(error_of([&] { prepare(options({tmp / "big.bin"}), tmp / "d"); }),
            tmp / "big.bin" + ": token 5 is id 300, past the vocabulary of data.tokenizer (300 tokens; is it the "
                              "vocabulary these tokens were made with?)");
  write_llmc(tmp / "l3.bin", {kEos, 7, int32_t(4000000000u)}, corpus::kLlmcMagicLlama3, 7, 4);
  EXPECT_EQ(error_of([&] { read_all(one_file(tmp / "l3.bin")); }),
            tmp / "l3.bin" + ": token 2 is id 4000000000, past the vocabulary of data.tokenizer (300 tokens; is it "
                             "the vocabulary these tokens were made with?)");
}

TEST(TokenSourcesBad, BadMagic) {
  TempDir tmp;
  write_llmc(tmp / "x.bin", {1, 2}, 20240521);  // by content this is nanoGPT; forced to llm.c it is not one
  EXPECT_EQ(error_of([&] { one_file(tmp / "x.bin", FileType::kLlmc); }),
            tmp / "x.bin" + ": not an llm.c token file: magic 20240521, expected 20240520 (uint16 tokens) or "
                            "20240801 (uint32 tokens)");
}

TEST(TokenSourcesBad, BadVersion) {
  TempDir tmp;
  write_llmc(tmp / "v2.bin", {1, 2}, corpus::kLlmcMagicGpt2, 2);
  EXPECT_EQ(error_of([&] { one_file(tmp / "v2.bin"); }),
            tmp / "v2.bin" + ": llm.c token file version 2 is not supported (magic 20240520 goes with version 1)");
  write_llmc(tmp / "l3v1.bin", {1, 2}, corpus::kLlmcMagicLlama3, 1, 4);
  EXPECT_EQ(error_of([&] { one_file(tmp / "l3v1.bin"); }),
            tmp / "l3v1.bin" + ": llm.c token file version 1 is not supported (magic 20240801 goes with version 7)");
}

TEST(TokenSourcesBad, CountAndSizeDisagree) {
  TempDir tmp;
  write_llmc(tmp / "cut.bin", {1, 2, 3}, corpus::kLlmcMagicGpt2, 1, 2, 1000);
  EXPECT_EQ(error_of([&] { one_file(tmp / "cut.bin"); }),
            tmp / "cut.bin" + ": the llm.c header gives 1000 tokens (3024 bytes with the header), but the file has "
                              "1030 bytes (truncated or not an llm.c file)");
  write_llmc(tmp / "long.bin", {1, 2, 3}, corpus::kLlmcMagicGpt2, 1, 2, 2);
  EXPECT_EQ(error_of([&] { one_file(tmp / "long.bin"); }),
            tmp / "long.bin" + ": the llm.c header gives 2 tokens (1028 bytes with the header), but the file has "
                               "1030 bytes (truncated or not an llm.c file)");
  spit(tmp / "head.bin", slurp(tmp / "cut.bin").substr(0, 100));
  EXPECT_EQ(error_of([&] { one_file(tmp / "head.bin"); }),
            tmp / "head.bin" + ": not an llm.c token file: 100 bytes, shorter than its 1024-byte header");
}

TEST(TokenSourcesBad, OddSizedNanoGpt) {
  TempDir tmp;
  spit(tmp / "odd.bin", std::string("\x01\x00\x02\x00\x03", 5));
  EXPECT_EQ(error_of([&] { one_file(tmp / "odd.bin"); }),
            tmp / "odd.bin" + ": a nanoGPT token file holds 2-byte tokens, but its size 5 is odd (truncated or not "
                              "a token file)");
}

TEST(TokenSourcesBad, CompressedTokenFile) {
  TempDir tmp;
  spit(tmp / "train.bin.gz", std::string("\x1f\x8b\x08\x00", 4));
  EXPECT_EQ(error_of([&] { one_file(tmp / "train.bin.gz"); }),
            tmp / "train.bin.gz" + ": compressed token files are not supported: decompress it first");
}

// A preparation over text, llm.c and nanoGPT sources that stopped after a
// shard ending inside the llm.c file (the manifest cut back to it, the later
// shards gone) continues to the same bytes as one that ran through.
TEST(TokenSources, ResumedPreparationContinuesToTheSameShards) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "a.txt", 200);
  write_llmc(tmp / "b.bin", llmc_stream(random_docs(300, 1)));
  write_nanogpt(tmp / "c.bin", nanogpt_stream(random_docs(300, 2)));
  const auto o = options({tmp / "a.txt", tmp / "b.bin", tmp / "c.bin"}, 2000);
  const auto whole = prepare(o, tmp / "whole");
  prepare(o, tmp / "cut");

  auto m = corpus::read_manifest(tmp / "cut");
  ASSERT_TRUE(m);
  size_t keep = 0;
  while (keep < m->shards.size() && !(m->shards[keep].end_source == 1 && m->shards[keep].end_documents_in_source > 0))
    ++keep;
  ASSERT_LT(keep + 2, m->shards.size()) << "no shard ends inside the llm.c file";
  for (size_t i = keep + 1; i < m->shards.size(); ++i) {
    fs::remove(tmp / "cut" + "/" + m->shards[i].train_file);
    fs::remove(tmp / "cut" + "/" + m->shards[i].val_file);
  }
  m->shards.resize(keep + 1);
  m->complete = false;
  m->documents = m->train_tokens = m->val_tokens = 0;
  for (const auto& s : m->shards) {
    m->documents += s.documents;
    m->train_tokens += s.train_tokens;
    m->val_tokens += s.val_tokens;
  }
  corpus::write_manifest(tmp / "cut", *m);

  const auto resumed = prepare(o, tmp / "cut");
  EXPECT_FALSE(resumed.reused);
  ASSERT_EQ(resumed.train_shards.size(), whole.train_shards.size());
  for (size_t i = 0; i < whole.train_shards.size(); ++i) {
    EXPECT_EQ(slurp(whole.train_shards[i]), slurp(resumed.train_shards[i])) << i;
    EXPECT_EQ(slurp(whole.val_shards[i]), slurp(resumed.val_shards[i])) << i;
  }
  EXPECT_EQ(resumed.manifest.documents, whole.manifest.documents);
  EXPECT_EQ(resumed.manifest.train_tokens, whole.manifest.train_tokens);
  EXPECT_TRUE(prepare(o, tmp / "cut").reused);
}

TEST(TokenSources, TextSampleLeavesTokenSourcesOut) {
  TempDir tmp;
  write_llmc(tmp / "b.bin", llmc_stream(random_docs(10, 1)));
  spit(tmp / "a.txt", "one line\nanother line\n");
  EXPECT_EQ(corpus::write_text_sample(options({tmp / "b.bin", tmp / "a.txt"}), tmp / "s.txt", 100), 2);
  EXPECT_EQ(slurp(tmp / "s.txt"), "one line\nanother line\n");
  EXPECT_EQ(error_of([&] { corpus::write_text_sample(options({tmp / "b.bin"}), tmp / "s2.txt", 100); }),
            "data.corpus: every source is pretokenized (llm.c or nanoGPT .bin, e.g. " + tmp / "b.bin" +
                "): pretokenized sources need data.tokenizer (a GGUF with the vocabulary the tokens were made with)");
}

// Without data.tokenizer a run would train a tokenizer on the corpus: it
// says what is missing instead.
TEST(TokenSources, RunWithoutTokenizerSaysItNeedsOne) {
  TempDir tmp;
  write_llmc(tmp / "b.bin", llmc_stream(random_docs(10, 1)));
  train::TrainOptions t;
  t.run_dir = tmp / "run";
  t.config = test_support::tiny_run_config(tmp / "b.bin", 2);
  t.quiet = true;
  const std::string e = error_of([&] { train::run_training(t); });
  EXPECT_NE(e.find("pretokenized sources need data.tokenizer"), std::string::npos) << e;
}

TEST(TokenSources, TrainsOnAnLlmcFileWithItsTokenizer) {
  TempDir tmp;
  const Tokens stream = llmc_stream(random_docs(400, 11));
  write_llmc(tmp / "fineweb_train_000001.bin", stream);
  auto c = test_support::tiny_run_config(tmp / "fineweb_train_000001.bin", 3);
  c.data.tokenizer = fixture("tiny-gpt2.gguf");
  c.data.val_fraction = 0.1;
  const auto summary = test_support::run_quiet(tmp / "run", c, false);
  EXPECT_EQ(summary.last_step, 3);
  ASSERT_FALSE(summary.final_weights.empty());
  EXPECT_TRUE(std::isfinite(summary.last_loss));
  const auto m = corpus::read_manifest(tmp / "run/data");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->train_tokens + m->val_tokens, int64_t(stream.size()));
  placement(split_at_eos(stream), all_tokens(m->train_paths(tmp / "run/data")),
            all_tokens(m->val_paths(tmp / "run/data")));
}
