// Instruction data into packed windows (chat/chat_data.h, through the one
// preparation pipeline: corpus/prepare/) and the loader's reading of them
// (corpus/batch_loader.h WindowLabels).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "chat/chat_data.h"
#include "corpus/batch_loader.h"
#include "corpus/prepare/manifest.h"
#include "corpus/token_file.h"
#include "gguf/reader.h"
#include "kernels/cross_entropy.h"
#include "support/compress.h"
#include "support/files.h"
#include "support/temp_dir.h"
#include "train/run_data.h"

using namespace ggtrain;
using namespace ggtrain::chat;
using test_support::error_of;
using test_support::spit;
using test_support::TempDir;

namespace {

tokenizer::Tokenizer chat_tokenizer() {
  return tokenizer::Tokenizer::from_gguf(gguf::GgufFile(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf"))
      .with_control_tokens({"<|im_start|>", "<|im_end|>"});
}

std::string record(const std::string& q, const std::string& a) {
  return R"({"messages": [{"role": "user", "content": ")" + q + R"("}, {"role": "assistant", "content": ")" + a +
         "\"}]}\n";
}

std::string records(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += record("Question number " + std::to_string(i), "Answer " + std::to_string(i * 7));
  return s;
}

ChatDataOptions options(const std::string& file, int64_t seq_len) {
  ChatDataOptions o;
  o.corpus = {file};
  o.seq_len = seq_len;
  o.val_fraction = 0;
  return o;
}

std::vector<int32_t> all_of(const corpus::TokenStream& s) {
  std::vector<int32_t> v(size_t(s.size()));
  s.read(0, s.size(), v.data());
  return v;
}

corpus::PackCounts counts(const corpus::PreparedData& d) { return d.manifest.packed.value_or(corpus::PackCounts{}); }

}  // namespace

// Every window starts an example, no example crosses into the next window,
// padding carries no loss, and the trained tokens are the answers' and their
// end markers.
TEST(ChatData, PacksWholeExamplesIntoWindows) {
  TempDir tmp;
  const tokenizer::Tokenizer tok = chat_tokenizer();
  spit(tmp / "chat.jsonl", records(40));
  const int64_t T = 160;
  const corpus::PreparedData d = prepare_chat_data(options(tmp / "chat.jsonl", T), tok, tmp / "data", false);
  const corpus::PackCounts c = counts(d);
  EXPECT_EQ(c.examples, 40);
  EXPECT_EQ(c.truncated, 0);
  EXPECT_FALSE(d.reused);
  const corpus::TokenStream tokens(d.train_shards), flags(d.train_flags);
  ASSERT_EQ(tokens.size(), c.train_windows * T + 1);
  ASSERT_EQ(flags.size(), tokens.size());
  const auto ids = all_of(tokens), fl = all_of(flags);
  const int32_t end = tok.token_id("<|im_end|>");
  int64_t trained = 0, starts = 0, trained_ends = 0, prompt_ends = 0;
  for (int64_t w = 0; w < c.train_windows; ++w) {
    EXPECT_TRUE(fl[size_t(w * T)] & corpus::kFlagExampleStart) << "window " << w;
    EXPECT_FALSE(fl[size_t(w * T)] & corpus::kFlagTrained);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    trained += (fl[i] & corpus::kFlagTrained) != 0;
    if ((fl[i] & corpus::kFlagExampleStart) && ids[i] == tok.bos_id()) ++starts;
    if (ids[i] == end) ++((fl[i] & corpus::kFlagTrained) ? trained_ends : prompt_ends);
  }
  EXPECT_EQ(starts, 40);
  EXPECT_EQ(trained_ends, 40);  // each answer's end of turn carries loss, each question's does not
  EXPECT_EQ(prompt_ends, 40);
  EXPECT_EQ(trained, c.trained_tokens);
  // The second call finds the same inputs and reuses them.
  EXPECT_TRUE(prepare_chat_data(options(tmp / "chat.jsonl", T), tok, tmp / "data", false).reused);
  spit(tmp / "chat.jsonl", records(41));
  EXPECT_NE(error_of([&] {
              prepare_chat_data(options(tmp / "chat.jsonl", T), tok, tmp / "data", true);
            }).find("manifest.json: a source changed: " + (tmp / "chat.jsonl")),
            std::string::npos);
  EXPECT_EQ(counts(prepare_chat_data(options(tmp / "chat.jsonl", T), tok, tmp / "data", false)).examples, 41);
}

// The loader turns flags into masked targets and document starts.
TEST(ChatData, LoaderMasksPromptsAndStartsDocuments) {
  TempDir tmp;
  const tokenizer::Tokenizer tok = chat_tokenizer();
  spit(tmp / "chat.jsonl", records(12));
  const int64_t T = 160;
  const corpus::PreparedData d = prepare_chat_data(options(tmp / "chat.jsonl", T), tok, tmp / "data", false);
  const corpus::TokenStream tokens(d.train_shards), flags(d.train_flags);
  const auto ids = all_of(tokens), fl = all_of(flags);
  corpus::BatchLoader loader(tokens, T, 1, {&flags, -1});
  std::vector<int32_t> in(static_cast<size_t>(T)), tg(static_cast<size_t>(T)), ds(static_cast<size_t>(T));
  for (int64_t w = 0; w < loader.n_windows(); ++w) {
    loader.window(w, in.data(), tg.data(), ds.data());
    int32_t start = 0;
    for (int64_t t = 0; t < T; ++t) {
      const size_t i = size_t(w * T + t);
      EXPECT_EQ(in[size_t(t)], ids[i]);
      EXPECT_EQ(tg[size_t(t)], (fl[i + 1] & corpus::kFlagTrained) ? ids[i + 1] : corpus::kNoTarget);
      if (fl[i] & corpus::kFlagExampleStart) start = int32_t(t);
      EXPECT_EQ(ds[size_t(t)], start);
    }
  }
  // Text documents: BOS starts one (data.attention = "document").
  corpus::BatchLoader text(tokens, T, 1, {nullptr, tok.bos_id()});
  text.window(0, in.data(), tg.data(), ds.data());
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_NE(tg[size_t(t)], corpus::kNoTarget);
    if (in[size_t(t)] == tok.bos_id()) {
      EXPECT_EQ(ds[size_t(t)], t);
    }
  }
}

TEST(ChatData, OverflowTruncatesSplitsOrSkips) {
  TempDir tmp;
  const tokenizer::Tokenizer tok = chat_tokenizer();
  std::string long_answer;
  for (int i = 0; i < 60; ++i) long_answer += "and the word ";
  spit(tmp / "chat.jsonl.gz", test_support::gzip_of(records(3) + record("Tell", long_answer)));
  const int64_t T = 120;
  auto run = [&](corpus::Overflow o, const char* sub) {
    ChatDataOptions opt = options(tmp / "chat.jsonl.gz", T);
    opt.overflow = o;
    return counts(prepare_chat_data(opt, tok, tmp / sub, false));
  };
  const corpus::PackCounts truncated = run(corpus::Overflow::kTruncate, "t"),
                           split = run(corpus::Overflow::kSplit, "s"), skipped = run(corpus::Overflow::kSkip, "k");
  EXPECT_EQ(truncated.truncated, 1);
  EXPECT_EQ(truncated.examples, 4);
  EXPECT_EQ(split.split, 1);
  EXPECT_EQ(split.examples, 4);
  EXPECT_GT(split.trained_tokens, truncated.trained_tokens);
  EXPECT_EQ(skipped.too_long_skipped, 1);
  EXPECT_EQ(skipped.examples, 3);
}

TEST(ChatData, BadRecordsFailOrAreCounted) {
  TempDir tmp;
  const tokenizer::Tokenizer tok = chat_tokenizer();
  spit(tmp / "chat.jsonl", records(2) + "{\"messages\": []}\nnot json\n" + records(1));
  ChatDataOptions o = options(tmp / "chat.jsonl", 160);
  EXPECT_EQ(error_of([&] { prepare_chat_data(o, tok, tmp / "a", false); }),
            (tmp / "chat.jsonl") + ":3: the conversation has no messages");
  o.skip_bad = true;
  const corpus::PreparedData d = prepare_chat_data(o, tok, tmp / "b", false);
  const corpus::PackCounts s = counts(d);
  EXPECT_EQ(s.examples, 3);
  EXPECT_EQ(s.bad_skipped, 2);
  // The first one skipped is named, in the manifest too (a reused
  // preparation says it again).
  EXPECT_EQ(d.manifest.first_bad_record, (tmp / "chat.jsonl") + ":3: the conversation has no messages");
  EXPECT_EQ(corpus::read_manifest(tmp / "b")->first_bad_record, d.manifest.first_bad_record);
}

TEST(ChatData, AlpacaAndCompletionRecords) {
  TempDir tmp;
  const tokenizer::Tokenizer tok = chat_tokenizer();
  spit(tmp / "a.jsonl", "{\"instruction\": \"Add\", \"input\": \"1 2\", \"output\": \"3\"}\n");
  spit(tmp / "c.jsonl", "{\"prompt\": \"In the beginning\", \"completion\": \" God created\"}\n");
  ChatDataOptions o = options(tmp / "a.jsonl", 160);
  EXPECT_EQ(counts(prepare_chat_data(o, tok, tmp / "a", false)).examples, 1);
  o.corpus = {tmp / "c.jsonl"};
  const corpus::PreparedData d = prepare_chat_data(o, tok, tmp / "c", false);
  // A completion record is raw text: no template markers, the completion
  // and EOS trained.
  const auto ids = all_of(corpus::TokenStream(d.train_shards));
  const auto fl = all_of(corpus::TokenStream(d.train_flags));
  std::vector<int32_t> trained;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_NE(ids[i], tok.token_id("<|im_start|>"));
    if (fl[i] & corpus::kFlagTrained) trained.push_back(ids[i]);
  }
  ASSERT_FALSE(trained.empty());
  EXPECT_EQ(trained.back(), tok.eos_id());
  trained.pop_back();
  EXPECT_EQ(tok.decode(trained), "God created");  // decode drops the space prefix, as llama.cpp's
}

namespace {

std::vector<int32_t> shard_tokens(const std::string& path) { return all_of(corpus::TokenStream({path})); }

// Every shard but the last holds whole windows, the last one more token;
// read as one stream, every window starts an example.
void expect_whole_windows(const std::vector<std::string>& shards, const std::vector<std::string>& flags, int64_t T,
                          int64_t windows) {
  ASSERT_EQ(shards.size(), flags.size());
  for (size_t k = 0; k < shards.size(); ++k) {
    const int64_t n = corpus::TokenStream({shards[k]}).size();
    EXPECT_EQ(n % T, k + 1 == shards.size() ? 1 : 0) << shards[k];
    EXPECT_EQ(corpus::TokenStream({flags[k]}).size(), n) << flags[k];
  }
  const corpus::TokenStream tokens(shards), fl(flags);
  ASSERT_EQ(tokens.size(), windows * T + 1);
  const auto f = all_of(fl);
  for (int64_t w = 0; w <= windows; ++w) EXPECT_TRUE(f[size_t(w * T)] & corpus::kFlagExampleStart) << "window " << w;
}

}  // namespace

// Chat data is sharded as text is: each shard closes on a window boundary,
// the shards read as one packed stream, and a preparation stopped after a
// finished shard continues to the same bytes as one that ran through.
TEST(ChatData, ShardedAndContinuedAfterAnInterruption) {
  TempDir tmp;
  const tokenizer::Tokenizer tok = chat_tokenizer();
  // A shard closes between batches of 64 KiB of records: 4000 records
  // (about 80 bytes each) make several.
  const int n = 4000;
  spit(tmp / "chat.jsonl", records(n));
  const int64_t T = 160;
  ChatDataOptions o = options(tmp / "chat.jsonl", T);
  o.val_fraction = 0.1;
  const corpus::PreparedData one = prepare_chat_data(o, tok, tmp / "one", false);
  o.shard_tokens = 3 * T;
  const corpus::PreparedData whole = prepare_chat_data(o, tok, tmp / "whole", false);
  ASSERT_GE(whole.manifest.shards.size(), 4u);
  const corpus::PackCounts c = counts(whole), c1 = counts(one);
  ASSERT_GT(c.val_windows, 0);
  expect_whole_windows(whole.train_shards, whole.train_flags, T, c.train_windows);
  expect_whole_windows(whole.val_shards, whole.val_flags, T, c.val_windows);
  // The same examples, split the same way; only their windows differ.
  EXPECT_EQ(c.examples + c.val_examples, n);
  EXPECT_EQ(c.examples, c1.examples);
  EXPECT_EQ(c.val_examples, c1.val_examples);
  EXPECT_EQ(c.tokens, c1.tokens);
  EXPECT_EQ(c.trained_tokens, c1.trained_tokens);

  // What a kill after the second finished shard leaves: its manifest, the
  // first two shards' files, and no complete mark.
  prepare_chat_data(o, tok, tmp / "cut", false);
  auto m = corpus::read_manifest(tmp / "cut");
  ASSERT_TRUE(m);
  corpus::Manifest cut = *m;
  cut.shards.resize(2);
  cut.complete = false;
  cut.documents = cut.train_tokens = cut.val_tokens = 0;
  cut.packed.reset();
  for (const auto& s : cut.shards) cut.count(s);
  for (size_t k = 2; k < m->shards.size(); ++k)
    for (const auto& f :
         {m->shards[k].train_file, m->shards[k].val_file, m->shards[k].train_flags_file, m->shards[k].val_flags_file})
      std::filesystem::remove(tmp / ("cut/" + f));
  corpus::write_manifest(tmp / "cut", cut);
  const corpus::PreparedData resumed = prepare_chat_data(o, tok, tmp / "cut", true);
  EXPECT_FALSE(resumed.reused);
  ASSERT_EQ(resumed.manifest.shards.size(), whole.manifest.shards.size());
  for (const auto& s : whole.manifest.shards)
    for (const auto& f : {s.train_file, s.val_file, s.train_flags_file, s.val_flags_file})
      EXPECT_EQ(shard_tokens(tmp / ("whole/" + f)), shard_tokens(tmp / ("cut/" + f))) << f;
  const corpus::PackCounts r = counts(resumed);
  EXPECT_EQ(r.examples, c.examples);
  EXPECT_EQ(r.train_windows, c.train_windows);
  EXPECT_EQ(r.padding, c.padding);
}

// Reuse goes by content, not by time: a touched file is the same data, an
// edited one of the same size is not.
TEST(ChatData, TouchedSourceIsReusedEditedOneIsNot) {
  TempDir tmp;
  const tokenizer::Tokenizer tok = chat_tokenizer();
  spit(tmp / "chat.jsonl", records(20));
  const ChatDataOptions o = options(tmp / "chat.jsonl", 160);
  prepare_chat_data(o, tok, tmp / "data", false);
  const auto later = std::filesystem::last_write_time(tmp / "chat.jsonl") + std::chrono::hours(1);
  std::filesystem::last_write_time(tmp / "chat.jsonl", later);
  EXPECT_TRUE(prepare_chat_data(o, tok, tmp / "data", true).reused);
  std::string text = records(20);
  text[text.find("Answer 7")] = 'X';  // same size, other content
  spit(tmp / "chat.jsonl", text);
  std::filesystem::last_write_time(tmp / "chat.jsonl", later + std::chrono::hours(1));
  EXPECT_NE(error_of([&] { prepare_chat_data(o, tok, tmp / "data", true); }).find("its content changed"),
            std::string::npos);
}

// A chat run folder prepared before chat data had shards (data/chat.json,
// chat-train.tok, chat-val.tok and their flags, no manifest) resumes on
// those files as they are, and nothing is prepared beside them.
TEST(ChatData, RunFolderPreparedTheOldWayResumesOnItsFiles) {
  TempDir tmp;
  const tokenizer::Tokenizer tok = chat_tokenizer();
  spit(tmp / "chat.jsonl", records(60));
  ChatDataOptions o = options(tmp / "chat.jsonl", 160);
  o.val_fraction = 0.2;
  const corpus::PreparedData d = prepare_chat_data(o, tok, tmp / "new", false);
  ASSERT_EQ(d.val_shards.size(), 1u);
  std::filesystem::create_directories(tmp / "run/data");
  std::filesystem::copy_file(d.train_shards[0], tmp / "run/data/chat-train.tok");
  std::filesystem::copy_file(d.train_flags[0], tmp / "run/data/chat-train.flags.tok");
  std::filesystem::copy_file(d.val_shards[0], tmp / "run/data/chat-val.tok");
  std::filesystem::copy_file(d.val_flags[0], tmp / "run/data/chat-val.flags.tok");
  spit(tmp / "run/data/chat.json", "{}\n");
  spit(tmp / "chat.jsonl", records(61));  // what the run started with is what it resumes on

  train::RunConfig c = train::preset("tiny");
  c.data.corpus = {tmp / "chat.jsonl"};
  c.data.format = train::DataFormat::kChat;
  c.train.seq_len = 160;
  const train::RunTokens r = train::open_run_tokens(c, tmp / "run", tok, true, true);
  ASSERT_EQ(r.train.size(), 1u);
  ASSERT_TRUE(r.train_flags && r.val && r.val_flags);
  EXPECT_EQ(all_of(*r.train[0]), all_of(corpus::TokenStream(d.train_shards)));
  EXPECT_EQ(all_of(*r.train_flags), all_of(corpus::TokenStream(d.train_flags)));
  EXPECT_EQ(all_of(*r.val), all_of(corpus::TokenStream(d.val_shards)));
  EXPECT_EQ(all_of(*r.val_flags), all_of(corpus::TokenStream(d.val_flags)));
  EXPECT_FALSE(std::filesystem::exists(corpus::manifest_path(tmp / "run/data")));
}
