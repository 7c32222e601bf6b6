// The llama (SPM) tokenizer: parity with sentencepiece itself on Genesis
// (KJV) and on crafted edge cases, GGUF round trips, the fixtures' vocabularies
// and hostile tokenizer metadata. Needs `bible` (Debian package bible-kjv).
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/sentencepiece_train.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using ggtrain::Error;
using ggtrain::gguf::GgufFile;
using ggtrain::gguf::GgufWriter;
using ggtrain::gguf::Value;
using ggtrain::tokenizer::Tokenizer;

std::string fixture(const std::string& name) { return std::string(GGTRAIN_FIXTURES_DIR) + "/" + name; }

// One folder per test process (CTest runs each test in its own process).
const struct TempDir {
  fs::path path = fs::temp_directory_path() / ("ggtrain-tok-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
} tmp;
const fs::path& temp_dir() { return tmp.path; }

// Verse text of a KJV range, one verse per line, references stripped.
std::string bible_text(const std::string& range) {
  if (std::system("command -v bible >/dev/null 2>&1") != 0) return "";
  std::string cmd = "bible -f " + range + " </dev/null | sed 's/^[^ ]* //'";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  return ::pclose(p) == 0 ? out : "";
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  return lines;
}

struct Genesis {
  std::vector<std::string> lines;
  std::string model;  // sentencepiece BPE, vocab 512, trained on them
};

// Trains once per process. A missing `bible` is a failure, not a skip: the
// test script installs bible-kjv.
void genesis(const Genesis** out) {
  static Genesis g;
  if (g.model.empty()) {
    std::string text = bible_text("Gen1:1-Gen50:26");
    ASSERT_FALSE(text.empty()) << "`bible -f Gen1:1-Gen50:26` gave no text: install the Debian "
                                  "package bible-kjv (scripts/setup.sh does)";
    g.lines = split_lines(text);
    ASSERT_EQ(g.lines.size(), 1533u) << "Genesis has 1533 verses";
    std::string input = (temp_dir() / "genesis.txt").string();
    FILE* f = std::fopen(input.c_str(), "wb");
    ASSERT_TRUE(f);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    std::string model = (temp_dir() / "genesis-512.model").string();
    ggtrain::tokenizer::train_sentencepiece_bpe(input, 512, model);
    g.model = model;
  }
  *out = &g;
}

// Edge cases sentencepiece and llama.cpp must agree on: digits (split one by
// one), runs of spaces, leading/trailing spaces, tabs, embedded newlines,
// accents, CJK and emoji (byte fallback: not in the Genesis vocabulary), and
// text that looks like special pieces (plain text when not parsing specials).
const std::vector<std::string> kCrafted = {
    "In the year 1611, 3.14159 and 42000 souls; 0",
    "a  b   c    d",
    "   leading spaces",
    "trailing spaces   ",
    " ",
    "  ",
    "tab\tseparated\tcolumns\t",
    "line one\nline two\n\nline four",
    "Café naïve résumé Ångström Øresund façade",
    "日本語のテキスト、中文文本。한국어",
    "emoji 🙂👍🏽 family 👨‍👩‍👧 flags 🇫🇷",
    "<s> </s> <unk> <0x41> literal",
    "And God said, Let there be light: and there was light.",
    "x",
};

std::vector<int32_t> sp_ids(const sentencepiece::SentencePieceProcessor& sp, const std::string& s) {
  std::vector<int> ids;
  EXPECT_TRUE(sp.Encode(s, &ids).ok());
  return {ids.begin(), ids.end()};
}

TEST(Tokenizer, MatchesSentencepieceOnGenesisAndCraftedLines) {
  const Genesis* g;
  ASSERT_NO_FATAL_FAILURE(genesis(&g));
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(g->model).ok());
  Tokenizer tok = Tokenizer::from_sentencepiece(g->model);
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.unk_id(), 0);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.add_space_prefix());

  size_t matched = 0;
  for (const auto& line : g->lines) {
    auto ours = tok.encode(line, false);
    auto ref = sp_ids(sp, line);
    EXPECT_EQ(ours, ref) << line;
    matched += ours == ref;
    EXPECT_EQ(tok.decode(ours), line);
  }
  std::printf("Genesis: %zu of %zu lines tokenize exactly as sentencepiece\n", matched, g->lines.size());
  EXPECT_EQ(matched, g->lines.size());

  for (const auto& s : kCrafted) {
    auto ours = tok.encode(s, false);
    EXPECT_EQ(ours, sp_ids(sp, s)) << s;
    EXPECT_EQ(tok.decode(ours), s) << s;
    std::string streamed;  // token_to_piece is what a streaming printer shows
    for (int32_t id : ours) streamed += tok.token_to_piece(id);
    EXPECT_EQ(streamed, " " + s) << s;
  }
  EXPECT_TRUE(tok.encode("", false).empty());
  EXPECT_EQ(tok.encode("", true), std::vector<int32_t>{1});
}

TEST(Tokenizer, BosAndDecodeFollowLlamaCpp) {
  const Genesis* g;
  ASSERT_NO_FATAL_FAILURE(genesis(&g));
  Tokenizer tok = Tokenizer::from_sentencepiece(g->model);
  auto plain = tok.encode("In the beginning", false);
  auto with_bos = tok.encode("In the beginning", true);
  ASSERT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(with_bos[0], tok.bos_id());
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), with_bos.begin() + 1));
  // llama_detokenize drops the prefix space only when the ids do not start
  // with BOS; control pieces render as nothing.
  EXPECT_EQ(tok.decode(plain), "In the beginning");
  EXPECT_EQ(tok.decode(with_bos), " In the beginning");
  EXPECT_EQ(tok.token_to_piece(tok.bos_id()), "");
  EXPECT_EQ(tok.token_to_piece(tok.eos_id()), "");
  EXPECT_EQ(tok.token_to_piece(tok.unk_id()), "");
  // A byte token is the raw byte, even half of a UTF-8 character.
  auto emoji = tok.encode("🙂", false);
  ASSERT_GE(emoji.size(), 4u);
  EXPECT_EQ(tok.token_to_piece(emoji.back()), "\x82");
  EXPECT_THROW(tok.token_to_piece(512), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
}

TEST(Tokenizer, GgufRoundTrip) {
  const Genesis* g;
  ASSERT_NO_FATAL_FAILURE(genesis(&g));
  Tokenizer tok = Tokenizer::from_sentencepiece(g->model);
  GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  tok.add_to_gguf(w);
  std::string path = (temp_dir() / "tok.gguf").string();
  w.write(path);

  GgufFile f(path);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.find("tokenizer.ggml.bos_token_id")->type, ggtrain::gguf::ValueType::U32);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_eos_token"));
  const auto& pieces = f.find("tokenizer.ggml.tokens")->items;
  const auto& types = f.find("tokenizer.ggml.token_type")->items;
  ASSERT_EQ(pieces.size(), 512u);
  ASSERT_EQ(types.size(), 512u);
  int n_bytes = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string& p = pieces[i].s;
    int64_t want = p == "<0x41>" ? 6 : p == "<unk>" ? 2 : p == "<s>" || p == "</s>" ? 3 : -1;
    if (want >= 0) {
      EXPECT_EQ(types[i].i, want) << p;
    }
    n_bytes += types[i].i == 6;
  }
  EXPECT_EQ(n_bytes, 256);

  Tokenizer back = Tokenizer::from_gguf(f);
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  for (const auto& line : g->lines) EXPECT_EQ(back.encode(line, true), tok.encode(line, true));
  for (const auto& s : kCrafted) {
    EXPECT_EQ(back.encode(s, false), tok.encode(s, false)) << s;
    EXPECT_EQ(back.decode(back.encode(s, false)), s) << s;
  }
}

TEST(Tokenizer, TinySpmFixture) {
  Tokenizer tok = Tokenizer::from_gguf(GgufFile(fixture("tiny-spm.gguf")));
  EXPECT_EQ(tok.vocab_size(), 300);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.token_type(3 + 'A'), 6);
  for (std::string s :
       {"hello world", "The quick brown fox", "  two  spaces ", "naïve 🙂 日本", "tab\tand\nnewline"}) {
    auto ids = tok.encode(s, true);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(tok.decode(std::vector<int32_t>(ids.begin() + 1, ids.end())), s);
  }
}

// ref-gqa-untied-model.gguf has only byte pieces: the README spells out the
// ids (byte b is b + 3, a space is U+2581 = 3 bytes).
TEST(Tokenizer, ByteOnlyVocabularyFixture) {
  Tokenizer tok = Tokenizer::from_gguf(GgufFile(fixture("ref-gqa-untied-model.gguf")));
  EXPECT_EQ(tok.encode("hi", true), (std::vector<int32_t>{1, 0xE2 + 3, 0x96 + 3, 0x81 + 3, 'h' + 3, 'i' + 3}));
  // Byte tokens decode to raw bytes, never unescaped: without a "▁" piece
  // llama.cpp prints the spaces as U+2581, and so do we.
  EXPECT_EQ(tok.decode(tok.encode("a b", false)), "\xe2\x96\x81"
                                                  "a\xe2\x96\x81"
                                                  "b");
  // 0xFF has no token there; llama.cpp throws too.
  EXPECT_THROW(tok.encode("\xff", false), Error);
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
  }
}

// "llama" and "gpt2" (test_bpe_tokenizer.cpp) are read; other types are not.
TEST(Tokenizer, OtherVocabularyTypesAreNotSupported) {
  GgufWriter w;
  w.set("tokenizer.ggml.model", Value::str("bert"));
  w.set("tokenizer.ggml.tokens", Value::string_array({"[PAD]", "a"}));
  std::string path = (temp_dir() / "bert.gguf").string();
  w.write(path);
  expect_error([&] { Tokenizer::from_gguf(GgufFile(path)); }, {path, "tokenizer.ggml.model", "bert", "not supported"});
}

// A valid small vocabulary, then one key broken at a time.
struct Vocab {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<float> scores{0, 0, 0};
  std::vector<int32_t> types{2, 3, 3};
  Vocab() {
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      add(buf, 0, 6);
    }
    add("\xe2\x96\x81", -1, 1);  // 259: ▁
    add("a", -2, 1);  // 260
    add("b", -3, 1);  // 261
    add("\xe2\x96\x81"
        "a",
        -4, 1);  // 262: ▁a
    add("\xe2\x96\x81"
        "b",
        -5, 1);  // 263: ▁b
    add("<|sep|>", 0, 4);  // 264: user-defined
  }
  void add(const std::string& t, float s, int32_t ty) {
    tokens.push_back(t);
    scores.push_back(s);
    types.push_back(ty);
  }
  GgufWriter writer() const {
    GgufWriter w;
    w.set("tokenizer.ggml.model", Value::str("llama"));
    w.set("tokenizer.ggml.tokens", Value::string_array(tokens));
    w.set("tokenizer.ggml.scores", Value::f32_array(scores));
    w.set("tokenizer.ggml.token_type", Value::i32_array(types));
    w.set("tokenizer.ggml.bos_token_id", Value::u32(1));
    w.set("tokenizer.ggml.eos_token_id", Value::u32(2));
    w.set("tokenizer.ggml.unknown_token_id", Value::u32(0));
    return w;
  }
};

Tokenizer load(const GgufWriter& w, const std::string& name) {
  std::string path = (temp_dir() / name).string();
  w.write(path);
  return Tokenizer::from_gguf(GgufFile(path));
}

TEST(Tokenizer, UserDefinedPiecesAreSplitOutFirst) {
  Tokenizer tok = load(Vocab().writer(), "ud.gguf");
  // As llama.cpp: the piece is cut out before BPE and the text after it gets
  // the space prefix again.
  EXPECT_EQ(tok.encode("ab<|sep|>b", false), (std::vector<int32_t>{262, 261, 264, 263}));
  EXPECT_EQ(tok.encode("<|sep|>", true), (std::vector<int32_t>{1, 264}));
  EXPECT_EQ(tok.token_to_piece(264), "<|sep|>");
}

TEST(Tokenizer, HostileMetadataNamesFileAndKey) {
  struct Case {
    const char* name;
    std::function<void(Vocab&, GgufWriter&)> mutate;
    const char* key;
  };
  const std::vector<Case> cases = {
      {"scores-short",
       [](Vocab& v, GgufWriter& w) {
         v.scores.pop_back();
         w.set("tokenizer.ggml.scores", Value::f32_array(v.scores));
       },
       "tokenizer.ggml.scores"},
      {"types-long",
       [](Vocab& v, GgufWriter& w) {
         v.types.push_back(1);
         w.set("tokenizer.ggml.token_type", Value::i32_array(v.types));
       },
       "tokenizer.ggml.token_type"},
      {"types-f32", [](Vocab& v, GgufWriter& w) { w.set("tokenizer.ggml.token_type", Value::f32_array(v.scores)); },
       "tokenizer.ggml.token_type"},
      {"type-99",
       [](Vocab& v, GgufWriter& w) {
         v.types[5] = 99;
         w.set("tokenizer.ggml.token_type", Value::i32_array(v.types));
       },
       "tokenizer.ggml.token_type"},
      {"bos-range", [](Vocab&, GgufWriter& w) { w.set("tokenizer.ggml.bos_token_id", Value::u32(265)); },
       "tokenizer.ggml.bos_token_id"},
      {"eos-negative", [](Vocab&, GgufWriter& w) { w.set("tokenizer.ggml.eos_token_id", Value::i32(-1)); },
       "tokenizer.ggml.eos_token_id"},
      {"unk-string", [](Vocab&, GgufWriter& w) { w.set("tokenizer.ggml.unknown_token_id", Value::str("0")); },
       "tokenizer.ggml.unknown_token_id"},
      {"no-tokens", [](Vocab&, GgufWriter& w) { w.set("tokenizer.ggml.tokens", Value::str("x")); },
       "tokenizer.ggml.tokens"},
      {"tokens-i32", [](Vocab& v, GgufWriter& w) { w.set("tokenizer.ggml.tokens", Value::i32_array(v.types)); },
       "tokenizer.ggml.tokens"},
      {"tokens-empty", [](Vocab&, GgufWriter& w) { w.set("tokenizer.ggml.tokens", Value::string_array({})); },
       "tokenizer.ggml.tokens"},
      {"duplicate",
       [](Vocab& v, GgufWriter& w) {
         v.tokens[261] = "a";
         w.set("tokenizer.ggml.tokens", Value::string_array(v.tokens));
       },
       "tokenizer.ggml.tokens"},
      {"bad-byte-piece",
       [](Vocab& v, GgufWriter& w) {
         v.types[260] = 6;
         w.set("tokenizer.ggml.token_type", Value::i32_array(v.types));
       },
       "tokenizer.ggml.token_type"},
      {"model-u32", [](Vocab&, GgufWriter& w) { w.set("tokenizer.ggml.model", Value::u32(1)); },
       "tokenizer.ggml.model"},
      {"add-bos-u8", [](Vocab&, GgufWriter& w) { w.set("tokenizer.ggml.add_bos_token", Value::u8(1)); },
       "tokenizer.ggml.add_bos_token"},
  };
  for (const auto& c : cases) {
    Vocab v;
    GgufWriter w = v.writer();
    c.mutate(v, w);
    std::string path = (temp_dir() / (std::string(c.name) + ".gguf")).string();
    w.write(path);
    SCOPED_TRACE(c.name);
    expect_error([&] { Tokenizer::from_gguf(GgufFile(path)); }, {path, c.key});
  }
  // A GGUF without a tokenizer at all.
  GgufWriter bare;
  bare.set("general.architecture", Value::str("llama"));
  std::string path = (temp_dir() / "bare.gguf").string();
  bare.write(path);
  expect_error([&] { Tokenizer::from_gguf(GgufFile(path)); }, {path, "tokenizer.ggml.model"});
}

TEST(Tokenizer, TrainingErrors) {
  std::string out = (temp_dir() / "x.model").string();
  expect_error([&] { ggtrain::tokenizer::train_sentencepiece_bpe("/nonexistent/text.txt", 512, out); },
               {"/nonexistent/text.txt"});
  std::string text = (temp_dir() / "small.txt").string();
  FILE* f = std::fopen(text.c_str(), "wb");
  std::fputs("hello world\n", f);
  std::fclose(f);
  expect_error([&] { ggtrain::tokenizer::train_sentencepiece_bpe(text, 259, out); }, {"259"});
  EXPECT_FALSE(fs::exists(out));
  expect_error([&] { Tokenizer::from_sentencepiece(text); }, {text});
}

// Speed: the whole KJV, line by line, as the corpus preparation does it.
TEST(Tokenizer, WholeKjvIsFast) {
  const Genesis* g;
  ASSERT_NO_FATAL_FAILURE(genesis(&g));
  std::string kjv = bible_text("Gen1:1-Rev22:21");
  ASSERT_GT(kjv.size(), 4000000u);
  auto lines = split_lines(kjv);
  Tokenizer tok = Tokenizer::from_sentencepiece(g->model);
  auto t0 = std::chrono::steady_clock::now();
  size_t n = 0;
  for (const auto& l : lines) n += tok.encode(l, true).size();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("KJV: %zu lines, %zu bytes -> %zu tokens in %.3f s\n", lines.size(), kjv.size(), n, s);
  EXPECT_LT(s, 5.0);
}

}  // namespace
