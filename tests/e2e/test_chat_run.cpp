// Instruction-tuning runs end to end (data.format = "chat"): the grown
// vocabulary, the template and end-of-turn id in every checkpoint, exact
// resume, the loss as the mean over the answers' tokens of the whole step,
// and `ggtrain chat` on the result (history, cache reuse, a terminal).
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>
#include <pty.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "chat/chat_session.h"
#include "chat/template.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "infer/decoder.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/init.h"
#include "model/params.h"
#include "model/vocab_growth.h"
#include "quant/gguf_floats.h"
#include "support/cli_runner.h"
#include "support/compare.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "tokenizer/tokenizer.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"

using namespace ggtrain;
using test_support::TempDir;

namespace {

// Questions about the synthetic corpus' lines, answered with a short word.
void write_chat_set(const std::string& path, int n) {
  std::ofstream out(path);
  const char* words[] = {"alpha", "beta", "gamma", "delta"};
  for (int i = 0; i < n; ++i)
    out << fmt::format(R"({{"messages": [{{"role": "user", "content": "Which word is number {}?"}}, )"
                       R"({{"role": "assistant", "content": "{}"}}]}})",
                       i % 4, words[i % 4])
        << "\n";
}

// The tiny preset with room for a chat (context 256), 10 steps on the
// synthetic corpus: its step-10 checkpoint (or another context).
std::string chat_base(TempDir& tmp, int64_t ctx = 256) {
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1200);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 10);
  c.model.ctx = ctx;
  test_support::run_quiet(tmp / "base", c, false);
  return train::weights_path(tmp / "base", 10);
}

train::RunConfig chat_config(TempDir& tmp, const std::string& base, int64_t steps) {
  train::RunConfig c = train::preset("s15");  // the model section comes from init.from
  write_chat_set(tmp / "chat.jsonl", 200);
  c.data.corpus = {tmp / "chat.jsonl"};
  c.data.format = train::DataFormat::kChat;
  c.init.from = base;
  c.train.steps = steps;
  c.train.batch = 4;
  c.train.seq_len = 128;
  c.train.threads = 1;
  c.train.eval_every = 0;
  c.train.sample_every = 0;
  c.train.lr_max = 3e-3;
  c.train.warmup_steps = 2;
  c.checkpoint.every = 5;
  return c;
}

double loss_at(const std::string& run, int64_t step) {
  std::ifstream in(run + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line))
    if (line.find(fmt::format("\"step\":{},", step)) != std::string::npos) {
      const auto at = line.find("\"loss\":");
      return std::stod(line.substr(at + 7));
    }
  return NAN;
}

double first_loss(const std::string& run) { return loss_at(run, 1); }

// Weather questions answered through a tool: the call, its output, the
// answer (OpenAI's record shape).
void write_tool_set(const std::string& path, int n) {
  std::ofstream out(path);
  const char* cities[] = {"Paris", "Lyon", "Nice", "Lille"};
  for (int i = 0; i < n; ++i) {
    const char* city = cities[i % 4];
    out << fmt::format(
               R"({{"tools": [{{"type": "function", "function": {{"name": "get_weather", "parameters": {{"type": )"
               R"("object", "properties": {{"city": {{"type": "string"}}}}}}}}}}], "messages": [{{"role": "user", )"
               R"("content": "Weather in {0}?"}}, {{"role": "assistant", "content": null, "tool_calls": [{{"type": )"
               R"("function", "function": {{"name": "get_weather", "arguments": {{"city": "{0}"}}}}}}]}}, {{"role": )"
               R"("tool", "content": "{1} C"}}, {{"role": "assistant", "content": "{1} C in {0}."}}]}})",
               city, 10 + i % 4)
        << "\n";
  }
}

}  // namespace

TEST(ChatRun, GrowsTheVocabularyAndCarriesTheTemplate) {
  TempDir tmp;
  const std::string base = chat_base(tmp);
  test_support::run_quiet(tmp / "run", chat_config(tmp, base, 5), false);
  const gguf::GgufFile b(base), w(train::weights_path(tmp / "run", 5));
  const auto tb = tokenizer::Tokenizer::from_gguf(b), tw = tokenizer::Tokenizer::from_gguf(w);
  ASSERT_EQ(tw.vocab_size(), tb.vocab_size() + 2);
  EXPECT_EQ(model::config_from_gguf(w).vocab, tw.vocab_size());
  EXPECT_EQ(tw.piece(int32_t(tb.vocab_size())), "<|im_start|>");
  EXPECT_EQ(tw.token_type(int32_t(tb.vocab_size()) + 1), tokenizer::kControl);
  EXPECT_EQ(tw.chat_template(), chat::template_info(chat::Template::kChatml).jinja);
  EXPECT_EQ(tw.eot_id(), tw.token_id("<|im_end|>"));
  EXPECT_EQ(w.get_uint("tokenizer.ggml.eot_token_id"), uint64_t(tw.token_id("<|im_end|>")));
}

// Tool-calling records train through Qwen3's template: the checkpoint
// carries that template (tool branches and all, for llama.cpp --jinja) and
// the loss on the calls and answers falls.
TEST(ChatRun, TrainsToolCallsThroughQwen3sTemplate) {
  TempDir tmp;
  const std::string base = chat_base(tmp, 1024);  // Qwen3's tool prompt is long in a small vocabulary
  train::RunConfig c = chat_config(tmp, base, 30);
  write_tool_set(tmp / "tools.jsonl", 64);
  c.data.corpus = {tmp / "tools.jsonl"};
  c.data.chat_template = "qwen3";
  c.train.seq_len = 1024;
  c.train.batch = 2;
  c.checkpoint.every = 30;
  test_support::run_quiet(tmp / "run", c, false);
  const auto tw = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(train::weights_path(tmp / "run", 30)));
  EXPECT_EQ(tw.chat_template(), chat::template_info(chat::Template::kQwen3).jinja);
  EXPECT_NE(tw.chat_template().find("tool_call"), std::string::npos);
  const double first = loss_at(tmp / "run", 1), last = loss_at(tmp / "run", 30);
  ASSERT_TRUE(std::isfinite(first) && std::isfinite(last));
  EXPECT_LT(last, 0.5 * first);
}

TEST(ChatRun, ResumesExactly) {
  TempDir tmp;
  const std::string base = chat_base(tmp);
  test_support::expect_exact_resume(tmp / "a", tmp / "b", chat_config(tmp, base, 10), 5);
}

// `ggtrain data prepare` makes the chat data a run would make at its start
// (the template's markers added to the vocabulary first), and the run
// trains on it as it is: the same weights as a run that prepared its own,
// and the prepared shard is not written again.
TEST(ChatRun, DataPreparedAheadIsWhatTheRunTrainsOn) {
  TempDir tmp;
  const std::string base = chat_base(tmp);
  const train::RunConfig c = chat_config(tmp, base, 5);
  test_support::spit(tmp / "chat.toml", train::to_toml(c));
  const auto r = test_support::run_cli(
      {GGTRAIN_BIN, "data", "prepare", "--quiet", "--config", tmp / "chat.toml", "--out", tmp / "ahead"},
      tmp / "prepare.log");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string shard = tmp / "ahead/data/train-00000.tok";
  ASSERT_TRUE(std::filesystem::exists(tmp / "ahead/data/train-00000.flags.tok")) << r.output;
  struct stat before {};
  ASSERT_EQ(::stat(shard.c_str(), &before), 0);
  test_support::run_quiet(tmp / "ahead", c, false);
  test_support::run_quiet(tmp / "self", c, false);
  struct stat after {};
  ASSERT_EQ(::stat(shard.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the run prepared the data again";
  std::string why;
  EXPECT_TRUE(
      test_support::same_tensor_data(train::weights_path(tmp / "ahead", 5), train::weights_path(tmp / "self", 5), &why))
      << why;
}

// The loss is the mean over the counted (answer) tokens of the whole step:
// one batch of 4 windows and two micro-batches of 2 give the same loss,
// although the micro-batches count different numbers of answer tokens.
TEST(ChatRun, LossIsTheMeanOverTheStepsAnswerTokens) {
  TempDir tmp;
  const std::string base = chat_base(tmp);
  train::RunConfig one = chat_config(tmp, base, 1), two = one;
  two.train.batch = 2;
  two.train.grad_accum = 2;
  test_support::run_quiet(tmp / "one", one, false);
  test_support::run_quiet(tmp / "two", two, false);
  const double l1 = first_loss(tmp / "one"), l2 = first_loss(tmp / "two");
  ASSERT_TRUE(std::isfinite(l1) && std::isfinite(l2));
  EXPECT_NEAR(l1, l2, 1e-5 * l1);
  std::string why;
  const gguf::GgufFile a(train::weights_path(tmp / "one", 1)), b(train::weights_path(tmp / "two", 1));
  const auto& ta = a.tensor("blk.0.attn_q.weight");
  const auto& tb = b.tensor("blk.0.attn_q.weight");
  const auto fa = quant::tensor_floats(a, ta), fb = quant::tensor_floats(b, tb);
  ASSERT_EQ(fa.size(), fb.size());
  // The same update, up to the order of the sums.
  EXPECT_TRUE(test_support::within_abs(test_support::compare(fa.data(), fb.data(), fa.size()), 1e-5));
}

// data.attention = "document" on text: each document (from its BOS) attends
// only to itself; the run resumes exactly and its loss is not the causal one.
TEST(ChatRun, DocumentAttentionForText) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 1200);
  auto c = test_support::tiny_run_config(tmp / "corpus.txt", 6);
  c.checkpoint.every = 3;
  auto causal = c;
  c.data.attention = train::AttentionSpan::kDocument;
  test_support::expect_exact_resume(tmp / "a", tmp / "b", c, 3);
  test_support::run_quiet(tmp / "causal", causal, false);
  const double doc = first_loss(tmp / "a"), plain = first_loss(tmp / "causal");
  ASSERT_TRUE(std::isfinite(doc) && std::isfinite(plain));
  EXPECT_NE(doc, plain);
}

TEST(ChatRun, NewTokenRowsStartAtTheMeanRow) {
  model::Config c;
  c.vocab = 5;
  c.d_model = 4;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.d_ff = 8;
  c.ctx = 8;
  c.tied = false;
  model::Config grown = c;
  grown.vocab = 7;
  const model::ParamLayout from(c), to(grown);
  std::vector<float> src(size_t(from.total())), dst(size_t(to.total()), NAN);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(i % 13) - 6.f;
  model::grow_vocabulary(from, src.data(), 5, to, dst.data());
  for (const char* name : {"token_embd.weight", "output.weight"}) {
    const auto& f = from.get(name);
    const auto& t = to.get(name);
    for (int64_t k = 0; k < 4; ++k) {
      double mean = 0;
      for (int64_t v = 0; v < 5; ++v) {
        EXPECT_EQ(dst[size_t(t.offset + v * 4 + k)], src[size_t(f.offset + v * 4 + k)]);
        mean += src[size_t(f.offset + v * 4 + k)] / 5.0;
      }
      for (int64_t v = 5; v < 7; ++v) EXPECT_FLOAT_EQ(dst[size_t(t.offset + v * 4 + k)], float(mean));
    }
  }
  const auto& q = to.get("blk.0.attn_q.weight");
  EXPECT_EQ(dst[size_t(q.offset)], src[size_t(from.get("blk.0.attn_q.weight").offset)]);
}

// Replies that reuse the cached prefix of earlier turns are the replies a
// fresh decoder gives the whole conversation, and a full context drops the
// oldest turns instead of failing.
TEST(ChatRun, SessionReusesTheCacheAndDropsOldTurns) {
  TempDir tmp;
  const std::string base = chat_base(tmp);
  test_support::run_quiet(tmp / "run", chat_config(tmp, base, 10), false);
  const gguf::GgufFile f(train::weights_path(tmp / "run", 10));
  const auto tok = tokenizer::Tokenizer::from_gguf(f);
  infer::SamplerConfig greedy;
  greedy.temperature = 0;
  infer::Decoder dec(f, 0), fresh_dec(f, 0);
  chat::ChatSession s(dec, tok, chat::Template::kChatml, "Answer with one word.");
  const std::vector<std::string> questions{"Which word is number 1?", "Which word is number 2?", "And number 3?"};
  std::vector<int32_t> fed;  // what the decoder has computed: each prompt and reply but its last token
  for (const std::string& q : questions) {
    const chat::Reply r = s.reply(q, 8, greedy, 1);
    // The cache kept exactly the prefix this prompt shares with what it held.
    const auto shared = std::mismatch(fed.begin(), fed.end(), r.prompt.begin(), r.prompt.end()).first - fed.begin();
    EXPECT_EQ(r.reused_tokens, shared);
    if (&q != &questions.front()) {
      EXPECT_GT(r.reused_tokens, 0) << "a later turn computed its history again";
    }
    fed = r.prompt;
    fed.insert(fed.end(), r.tokens.begin(), r.tokens.end() - 1);
    EXPECT_EQ(dec.cached_tokens(), fed);
    chat::ChatSession fresh(fresh_dec, tok, chat::Template::kChatml, "");
    chat::Conversation before = s.history();
    before.pop_back();  // the reply just given
    before.pop_back();  // and its question
    // A fresh session fed the same history answers the same.
    chat::ChatSession replay(fresh_dec, tok, chat::Template::kChatml, "Answer with one word.");
    for (size_t i = 1; i + 1 < before.size(); i += 2) replay.reply(before[i].content, 8, greedy, 1);
    const chat::Reply again = replay.reply(q, 8, greedy, 1);
    EXPECT_EQ(again.prompt, r.prompt);
    EXPECT_EQ(again.tokens, r.tokens);
  }
  // A context of 160 holds two short turns: older ones go.
  infer::Decoder small(f, 160);
  chat::ChatSession tight(small, tok, chat::Template::kChatml, "");
  int64_t dropped = 0;
  for (int i = 0; i < 8; ++i)
    dropped += tight.reply("Which word is number " + std::to_string(i % 4) + "?", 6, greedy, 1).dropped_turns;
  EXPECT_GT(dropped, 0);
  EXPECT_LE(int64_t(tight.history().size()), 8);
}

// A model whose replies never end: its final norm is zero, so every logit
// ties and greedy decoding repeats token 0 (<unk>, no stop token) until the
// context (8192, asked for with -c: chat's default stops at 4096) is full,
// which takes long enough for a Ctrl-C to land in the reply whatever the
// machine's load. A 1-layer, 32-wide model filled 4096 positions in under
// the test's 150 ms on a Xeon with AMX; this width and depth take seconds.
std::string endless_model(TempDir& tmp) {
  const auto tok = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf"));
  model::Config c;
  c.vocab = tok.vocab_size();
  c.d_model = 256;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.d_ff = 1024;
  c.ctx = 8192;
  c.tied = false;
  const model::ParamLayout layout(c);
  std::vector<float> p(size_t(layout.total()));
  model::init_params(c, layout, p.data(), 1);
  const auto& norm = layout.get("output_norm.weight");
  std::fill(p.begin() + norm.offset, p.begin() + norm.offset + norm.size, 0.0f);
  gguf::GgufWriter w;
  model::add_model_tensors(w, c, layout, p.data());
  tok.add_to_gguf(w);
  const std::string path = tmp / "endless.gguf";
  w.write(path);
  return path;
}

// `ggtrain chat` in a terminal: Ctrl-C ends a reply and a prompt follows,
// Ctrl-C at the prompt only drops the line, Ctrl-D quits with status 0.
TEST(ChatRun, TerminalSessionInterruptsAndQuits) {
  TempDir tmp;
  const std::string model = endless_model(tmp);
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl(GGTRAIN_BIN, GGTRAIN_BIN, "chat", "-m", model.c_str(), "-t", "1", "-c", "8192", "-n", "100000", "--temp", "0",
          "--chat-template", "chatml", "-sys", "Answer.", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string seen;
  auto read_until = [&](const std::string& what, int timeout_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (seen.find(what) == std::string::npos && std::chrono::steady_clock::now() < end) {
      fd_set fds;
      FD_ZERO(&fds);
      FD_SET(master, &fds);
      timeval tv{0, 20'000};
      if (select(master + 1, &fds, nullptr, nullptr, &tv) > 0) {
        char buf[4096];
        const ssize_t n = read(master, buf, sizeof buf);
        if (n <= 0) break;
        seen.append(buf, size_t(n));
      }
    }
    return seen.find(what) != std::string::npos;
  };
  auto send = [&](const std::string& s) { ASSERT_EQ(write(master, s.data(), s.size()), ssize_t(s.size())); };
  ASSERT_TRUE(read_until("> ", 20000)) << seen;
  // Ctrl-C a little after the question's echo lands in its reply (the
  // reply runs for seconds); a retry covers a Ctrl-C that came before the
  // program read the line (then it only drops the line).
  bool interrupted = false;
  for (int attempt = 0; attempt < 5 && !interrupted; ++attempt) {
    seen.clear();
    send("Tell me everything, at length.\n");
    read_until("Tell me everything, at length.", 2000);  // the terminal's echo
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    send("\x03");
    ASSERT_TRUE(read_until("\n> ", 20000)) << "no prompt after Ctrl-C: " << seen;
    interrupted = seen.find("chat: reply interrupted") != std::string::npos;
  }
  EXPECT_TRUE(interrupted) << "no reply was interrupted in 5 tries: " << seen;
  seen.clear();
  send("half a line");
  send("\x03");  // at the prompt: the line goes, the session stays
  ASSERT_TRUE(read_until("> ", 20000)) << seen;
  send("\x04");  // Ctrl-D at an empty line: end of input
  int status = 0;
  for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (waitpid(pid, &status, WNOHANG) == 0 && !WIFEXITED(status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "ggtrain chat did not quit on Ctrl-D";
  }
  close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}
