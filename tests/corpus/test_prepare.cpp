// Streaming preparation (src/corpus/prepare): shards read back as one
// stream equal an unsharded preparation, documents are BOS + text + EOS, an
// interrupted preparation continues to the same bytes, changed sources are
// noticed, a run folder prepared the old way still resumes exactly, and the
// thread count changes no byte.
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "corpus/prepare/prepare.h"
#include "corpus/token_file.h"
#include "support/compress.h"
#include "support/files.h"
#include "support/prepare_options.h"
#include "support/run_helpers.h"
#include "train/run_checkpoint.h"
#include "train/run_data.h"
#include "util/error.h"

using namespace ggtrain;
using test_support::TempDir;
namespace fs = std::filesystem;

using ggtrain::test_support::slurp;
using ggtrain::test_support::spit;

namespace {

std::vector<int32_t> all_tokens(const std::vector<std::string>& shards) {
  if (shards.empty()) return {};
  corpus::TokenStream s(shards);
  std::vector<int32_t> out(size_t(s.size()));
  s.read(0, s.size(), out.data());
  return out;
}

// A tokenizer trained on the synthetic corpus (320 pieces), once per test.
tokenizer::Tokenizer tiny_tokenizer(TempDir& tmp, const std::string& corpus) {
  auto c = test_support::tiny_run_config(corpus, 1);
  train::train_tokenizer_on_corpus(c, tmp / "tok.model", true);
  return tokenizer::Tokenizer::from_sentencepiece(tmp / "tok.model");
}

corpus::PrepareOptions options(const std::vector<std::string>& corpus, int64_t shard_tokens) {
  return test_support::small_batch_options(corpus, 0.1, shard_tokens);
}

}  // namespace

TEST(Prepare, ShardsReadAsOneStreamEqualOneShard) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 3000);
  const auto tok = tiny_tokenizer(tmp, tmp / "corpus.txt");
  const auto one = corpus::prepare_data(options({tmp / "corpus.txt"}, int64_t(1) << 40), tok, tmp / "one",
                                        corpus::OnMismatch::kRefuse);
  const auto many =
      corpus::prepare_data(options({tmp / "corpus.txt"}, 3000), tok, tmp / "many", corpus::OnMismatch::kRefuse);
  EXPECT_EQ(one.train_shards.size(), 1u);
  EXPECT_GE(many.train_shards.size(), 5u);
  EXPECT_EQ(all_tokens(one.train_shards), all_tokens(many.train_shards));
  EXPECT_EQ(all_tokens(one.val_shards), all_tokens(many.val_shards));
  EXPECT_EQ(one.manifest.documents, 3000);
  EXPECT_EQ(many.manifest.documents, 3000);
  // Validation holds about val_fraction of the documents, chosen per document.
  EXPECT_NEAR(double(one.manifest.val_tokens) / double(one.manifest.train_tokens + one.manifest.val_tokens), 0.1, 0.03);
}

// Users prepare on every core: documents are tokenized in parallel
// (dynamic chunks of 8) and must land in input order. At 1 and at 3
// threads, over batches of many documents of uneven length, every file of
// the data folder (training and validation shards, the manifest) is the
// same bytes.
TEST(Prepare, ShardsAreByteIdenticalAtOneAndThreeThreads) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 3000);
  const auto tok = tiny_tokenizer(tmp, tmp / "corpus.txt");
  auto prepare = [&](int threads, const std::string& dir) {
    omp_set_num_threads(threads);
    auto p = corpus::prepare_data(options({tmp / "corpus.txt"}, 5000), tok, dir, corpus::OnMismatch::kRefuse);
    omp_set_num_threads(1);
    return p;
  };
  const auto one = prepare(1, tmp / "one"), three = prepare(3, tmp / "three");
  ASSERT_GE(one.train_shards.size(), 3u);
  ASSERT_EQ(one.train_shards.size(), three.train_shards.size());
  ASSERT_EQ(one.val_shards.size(), three.val_shards.size());
  const fs::path dir1 = tmp / "one", dir3 = tmp / "three";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir1)) names.push_back(e.path().filename());
  ASSERT_GE(names.size(), one.train_shards.size() + one.val_shards.size() + 1);
  for (const auto& n : names) {
    ASSERT_TRUE(fs::exists(dir3 / n)) << n;
    EXPECT_TRUE(slurp(dir1 / n) == slurp(dir3 / n)) << n << " differs between 1 and 3 threads";
  }
}

TEST(Prepare, DocumentsAreBosTextEos) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 200);
  const auto tok = tiny_tokenizer(tmp, tmp / "corpus.txt");
  spit(tmp / "docs.jsonl", "{\"text\": \"in the beginning\\nwas light\"}\n{\"text\": \"and the king said\"}\n");
  auto o = options({tmp / "docs.jsonl"}, 1000);
  o.val_fraction = 0;
  const auto p = corpus::prepare_data(o, tok, tmp / "d", corpus::OnMismatch::kRefuse);
  std::vector<int32_t> want = tok.encode("in the beginning\nwas light", true);
  want.push_back(tok.eos_id());
  auto second = tok.encode("and the king said", true);
  want.insert(want.end(), second.begin(), second.end());
  want.push_back(tok.eos_id());
  EXPECT_EQ(all_tokens(p.train_shards), want);

  o.add_bos = false;
  o.add_eos = false;
  const auto bare = corpus::prepare_data(o, tok, tmp / "bare", corpus::OnMismatch::kRefuse);
  auto plain = tok.encode("in the beginning\nwas light", false);
  auto plain2 = tok.encode("and the king said", false);
  plain.insert(plain.end(), plain2.begin(), plain2.end());
  EXPECT_EQ(all_tokens(bare.train_shards), plain);
}

TEST(Prepare, FolderOfCompressedJsonlEqualsThePlainText) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 600);
  const auto tok = tiny_tokenizer(tmp, tmp / "corpus.txt");
  // The same documents as JSONL split over .gz and .zst files in a folder.
  std::ifstream in(tmp / "corpus.txt");
  std::string jsonl[3];
  int i = 0;
  for (std::string line; std::getline(in, line); ++i) jsonl[i / 200] += "{\"text\": \"" + line + "\"}\n";
  spit(tmp / "shards/a/000.jsonl.gz", test_support::gzip_of(jsonl[0]));
  spit(tmp / "shards/a/001.jsonl.zst", test_support::zstd_of(jsonl[1]));
  spit(tmp / "shards/b.jsonl", jsonl[2]);
  const auto text =
      corpus::prepare_data(options({tmp / "corpus.txt"}, 2000), tok, tmp / "t", corpus::OnMismatch::kRefuse);
  const auto json = corpus::prepare_data(options({tmp / "shards"}, 2000), tok, tmp / "j", corpus::OnMismatch::kRefuse);
  EXPECT_EQ(json.manifest.sources.size(), 3u);
  EXPECT_EQ(all_tokens(text.train_shards), all_tokens(json.train_shards));
  EXPECT_EQ(all_tokens(text.val_shards), all_tokens(json.val_shards));
}

TEST(Prepare, SeparateValidationCorpus) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 300);
  const auto tok = tiny_tokenizer(tmp, tmp / "corpus.txt");
  spit(tmp / "val.txt", "the king went into the land\nlight was good\n");
  auto o = options({tmp / "corpus.txt"}, 1 << 30);
  o.val_corpus = {tmp / "val.txt"};
  const auto p = corpus::prepare_data(o, tok, tmp / "d", corpus::OnMismatch::kRefuse);
  std::vector<int32_t> want = tok.encode("the king went into the land", true);
  want.push_back(tok.eos_id());
  auto b = tok.encode("light was good", true);
  want.insert(want.end(), b.begin(), b.end());
  want.push_back(tok.eos_id());
  EXPECT_EQ(all_tokens(p.val_shards), want);
  EXPECT_EQ(p.manifest.documents, 302);
}

// SIGKILL of `ggtrain data prepare` in the middle (after its second
// finished shard): the re-run continues after the last finished shard and
// ends with the same bytes as an uninterrupted preparation.
TEST(Prepare, KilledPreparationContinuesToTheSameShards) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 40000);
  tiny_tokenizer(tmp, tmp / "corpus.txt");
  const auto args = [&](const std::string& out) {
    return std::vector<std::string>{GGTRAIN_BIN, "data",
                                    "prepare",   "--quiet",
                                    "--preset",  "tiny",
                                    "--out",     out,
                                    "--set",     "data.corpus=" + std::string(tmp / "corpus.txt"),
                                    "--set",     "data.tokenizer=" + std::string(tmp / "tok.model"),
                                    "--set",     "data.shard_tokens=20000",
                                    "--set",     "train.threads=1"};
  };
  const auto spawn = [](const std::vector<std::string>& a) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (const auto& s : a) argv.push_back(const_cast<char*>(s.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  };
  const auto finish = [](pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  };
  ASSERT_EQ(finish(spawn(args(tmp / "whole"))), 0);
  const auto whole = corpus::read_manifest(tmp / "whole/data");
  ASSERT_TRUE(whole && whole->complete);
  ASSERT_GE(whole->shards.size(), 10u);

  const pid_t pid = spawn(args(tmp / "cut"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const auto m = corpus::read_manifest(tmp / "cut/data");
    if (m && m->shards.size() >= 2) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no shard finished";
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::kill(pid, SIGKILL);
  finish(pid);
  const auto cut = corpus::read_manifest(tmp / "cut/data");
  ASSERT_TRUE(cut);
  ASSERT_FALSE(cut->complete) << "the preparation finished before the kill; use a larger corpus";
  std::printf("killed after %zu of %zu shards\n", cut->shards.size(), whole->shards.size());

  ASSERT_EQ(finish(spawn(args(tmp / "cut"))), 0);
  const auto resumed = corpus::read_manifest(tmp / "cut/data");
  ASSERT_TRUE(resumed && resumed->complete);
  ASSERT_EQ(resumed->shards.size(), whole->shards.size());
  for (size_t i = 0; i < whole->shards.size(); ++i) {
    const auto& s = whole->shards[i];
    EXPECT_EQ(slurp(tmp / ("whole/data/" + s.train_file)), slurp(tmp / ("cut/data/" + s.train_file))) << s.train_file;
    EXPECT_EQ(slurp(tmp / ("whole/data/" + s.val_file)), slurp(tmp / ("cut/data/" + s.val_file))) << s.val_file;
  }
  EXPECT_EQ(resumed->train_tokens, whole->train_tokens);
  EXPECT_EQ(resumed->val_tokens, whole->val_tokens);
}

TEST(Prepare, ChangedSourceIsPreparedAgainOrRefused) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 300);
  const auto tok = tiny_tokenizer(tmp, tmp / "corpus.txt");
  const auto o = options({tmp / "corpus.txt"}, 1 << 30);
  corpus::prepare_data(o, tok, tmp / "d", corpus::OnMismatch::kRefuse);
  spit(tmp / "corpus.txt", slurp(tmp / "corpus.txt") + "one more document\n");
  try {
    corpus::prepare_data(o, tok, tmp / "d", corpus::OnMismatch::kRefuse);
    ADD_FAILURE() << "a changed source was not noticed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(tmp / "corpus.txt"), std::string::npos) << e.what();
  }
  const auto again = corpus::prepare_data(o, tok, tmp / "d", corpus::OnMismatch::kPrepareAgain);
  EXPECT_FALSE(again.reused);
  EXPECT_EQ(again.manifest.documents, 301);
}

TEST(Prepare, TextSampleIsSeededAndBounded) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1000);
  auto o = options({tmp / "corpus.txt"}, 1 << 30);
  EXPECT_EQ(corpus::write_text_sample(o, tmp / "all.txt", 5000), 1000);
  EXPECT_EQ(slurp(tmp / "all.txt"), slurp(tmp / "corpus.txt"));
  EXPECT_EQ(corpus::write_text_sample(o, tmp / "s1.txt", 100), 100);
  EXPECT_EQ(corpus::write_text_sample(o, tmp / "s2.txt", 100), 100);
  EXPECT_EQ(slurp(tmp / "s1.txt"), slurp(tmp / "s2.txt"));
}

// A run folder prepared before shards existed (data/train.tok and
// data/val.tok, no manifest) resumes on those tokens as they are: made here
// from a new run's shards, the resumed run ends bit-identical to an
// uninterrupted one.
TEST(Prepare, RunFolderPreparedTheOldWayResumesExactly) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1500);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 20);
  test_support::run_quiet(tmp / "a", c, false);
  test_support::run_quiet(tmp / "b", c, false, 10);
  const auto m = corpus::read_manifest(tmp / "b/data");
  ASSERT_TRUE(m);
  corpus::write_token_file(tmp / "b/data/train.tok", m->vocab, all_tokens(m->train_paths(tmp / "b/data")));
  corpus::write_token_file(tmp / "b/data/val.tok", m->vocab, all_tokens(m->val_paths(tmp / "b/data")));
  for (const auto& p : m->train_paths(tmp / "b/data")) fs::remove(p);
  for (const auto& p : m->val_paths(tmp / "b/data")) fs::remove(p);
  fs::remove(corpus::manifest_path(tmp / "b/data"));
  test_support::run_quiet(tmp / "b", c, true);
  EXPECT_FALSE(fs::exists(corpus::manifest_path(tmp / "b/data"))) << "the old data was prepared again";
  std::string why;
  EXPECT_TRUE(
      test_support::same_tensor_data(train::weights_path(tmp / "a", 20), train::weights_path(tmp / "b", 20), &why))
      << why;
  EXPECT_TRUE(test_support::same_tensor_data(train::state_path(tmp / "a", 20), train::state_path(tmp / "b", 20), &why))
      << why;
}

// Ids are checked as they are read: a shard opens without reading its ids
// (so opening a large corpus costs nothing), and the first read of a bad
// id fails naming the file and the index.
TEST(TokenFile, ChecksIdsAsTheyAreRead) {
  TempDir tmp;
  const std::string path = tmp / "a.tok";
  corpus::write_token_file(path, 300, {1, 2, 3, 299, 5});
  std::string b = slurp(path);
  const uint16_t bad = 300;
  std::memcpy(b.data() + 32 + 2 * 3, &bad, 2);  // id 3: one past the vocabulary
  spit(path, b);

  const corpus::TokenFile f(path);
  EXPECT_EQ(f.size(), 5);
  EXPECT_EQ(f[2], 3);
  EXPECT_EQ(f[4], 5);
  try {
    (void)f[3];
    FAIL() << "an id past the vocabulary was returned";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find("token 300 at index 3"), std::string::npos) << m;
  }
  const corpus::TokenStream s({path});
  std::vector<int32_t> out(5);
  EXPECT_NO_THROW(s.read(0, 3, out.data()));
  EXPECT_THROW(s.read(2, 2, out.data()), Error);
}
