// `ggtrain tokenizer import` of a SentencePiece-style tokenizer.json (BPE
// with byte fallback: Gemma, Llama 2, Mistral): the tokenizer.ggml.* keys
// llama.cpp's converter writes from the model's tokenizer.model, and the
// tokenization that follows. Real vocabularies against Hugging Face's own
// tokenization and llama.cpp's: tests/compat/llama_cpp_tokenizer_check.sh.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "corpus/token_file.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "support/temp_dir.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "train/trainer.h"

using namespace ggtrain;
using ggtrain::test_support::spit;
using ggtrain::test_support::TempDir;

namespace {

// Pieces 0-3 special, a byte piece, "▁", "a", "b", two merged pieces and a
// user-defined run of two "▁" (an added token that is not special).
std::string tokenizer_json(const std::string& normalizer) {
  return R"({"model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
    "vocab": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<0x0A>": 4, "\u2581": 5, "a": 6, "b": 7,
              "ab": 8, "\u2581ab": 9, "\u2581\u2581": 10},
    "merges": [["a", "b"], ["\u2581", "ab"], ["\u2581", "\u2581"]]},
  "added_tokens": [{"id": 0, "content": "<pad>", "special": true}, {"id": 1, "content": "<eos>", "special": true},
                   {"id": 2, "content": "<bos>", "special": true}, {"id": 3, "content": "<unk>", "special": true},
                   {"id": 10, "content": "\u2581\u2581", "special": false}],
  "normalizer": )" +
         normalizer + R"(, "pre_tokenizer": null})";
}

const char* kGemmaNormalizer = R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})";
const char* kLlama2Normalizer =
    R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})";

}  // namespace

TEST(HfTokenizer, SentencePieceStyleAsTheConverterWritesIt) {
  TempDir tmp;
  spit(tmp / "tokenizer.json", tokenizer_json(kGemmaNormalizer));
  spit(tmp / "tokenizer_config.json",
       R"({"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>",
           "add_bos_token": true, "add_eos_token": false})");
  const tokenizer::HfVocabulary v = tokenizer::read_hf_tokenizer(tmp / "tokenizer.json", tmp / "tokenizer_config.json");
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.pre, "default");
  EXPECT_TRUE(v.merges.empty());
  // Added tokens: control when special, user-defined otherwise with "▁" back
  // to spaces; byte pieces BYTE; the rest normal.
  EXPECT_EQ(v.types, (std::vector<int32_t>{3, 3, 3, 3, 6, 1, 1, 1, 1, 1, 4}));
  EXPECT_EQ(v.tokens[10], "  ");
  // Merged pieces score minus their first merge's rank; added ones -1000.
  EXPECT_EQ(v.scores, (std::vector<float>{-1000, -1000, -1000, -1000, 0, 0, 0, 0, -0.0f, -1, -1000}));
  ASSERT_TRUE(v.add_space_prefix.has_value());
  EXPECT_FALSE(*v.add_space_prefix);
  EXPECT_EQ(v.bos, 2);
  EXPECT_EQ(v.eos, 1);
  EXPECT_EQ(v.unk, 3);
  EXPECT_EQ(v.pad, 0);
  EXPECT_TRUE(v.add_bos);
  ASSERT_TRUE(v.add_eos.has_value());
  EXPECT_FALSE(*v.add_eos);

  // The file tokenizes as SentencePiece would: no space prefix, "ab" merged
  // before "▁ab", the user-defined run of spaces cut out first.
  gguf::GgufWriter w;
  tokenizer::add_hf_vocabulary(w, v);
  w.write(tmp / "vocab.gguf");
  const auto t = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(tmp / "vocab.gguf"));
  EXPECT_EQ(t.encode("ab ab", false), (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(t.encode("ab  ab", false), (std::vector<int32_t>{8, 10, 8}));
  EXPECT_EQ(t.encode("\n", false), (std::vector<int32_t>{4}));
}

TEST(HfTokenizer, PrependNormalizerMeansTheDefaultSpacePrefix) {
  TempDir tmp;
  spit(tmp / "tokenizer.json", tokenizer_json(kLlama2Normalizer));
  const tokenizer::HfVocabulary v = tokenizer::read_hf_tokenizer(tmp / "tokenizer.json", "");
  EXPECT_EQ(v.model, "llama");
  EXPECT_FALSE(v.add_space_prefix.has_value());  // llama.cpp's default for SentencePiece: true
  gguf::GgufWriter w;
  tokenizer::add_hf_vocabulary(w, v);
  w.write(tmp / "vocab.gguf");
  const gguf::GgufFile f(tmp / "vocab.gguf");
  EXPECT_EQ(f.find("tokenizer.ggml.add_space_prefix"), nullptr);
  EXPECT_EQ(tokenizer::Tokenizer::from_gguf(f).encode("ab", false), (std::vector<int32_t>{9}));
}

// data.tokenizer = a tokenizer.json (its tokenizer_config.json beside it):
// the run imports it into RUN_DIR/tokenizer.gguf, tokenizes the corpus with
// it (documents start with its BOS), writes it into every checkpoint, and
// resumes with it.
TEST(HfTokenizer, TrainsWithATokenizerJson) {
  TempDir dir;
  // Specials, the 256 byte pieces, printable ASCII ("▁" for the space) and
  // a few merges: SentencePiece BPE with byte fallback, Gemma-style.
  std::string vocab = R"("<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3)";
  int id = 4;
  for (int b = 0; b < 256; ++b) vocab += fmt::format(R"(, "<0x{:02X}>": {})", b, id++);
  for (char c = '!'; c <= '~'; ++c)
    if (c != '"' && c != '\\') vocab += fmt::format(R"(, "{}": {})", c, id++);
  vocab += fmt::format(R"(, "\u2581": {}, "th": {}, "\u2581th": {}, "he": {})", id, id + 1, id + 2, id + 3);
  const int n_tokens = id + 4;
  spit(dir / "tokenizer.json", R"({"model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "vocab": {)" +
                                   vocab +
                                   R"(}, "merges": [["t", "h"], ["\u2581", "th"], ["h", "e"]]},
  "added_tokens": [{"id": 0, "content": "<pad>", "special": true}, {"id": 1, "content": "<eos>", "special": true},
                   {"id": 2, "content": "<bos>", "special": true}, {"id": 3, "content": "<unk>", "special": true}],
  "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, "pre_tokenizer": null})");
  spit(dir / "tokenizer_config.json", R"({"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": true})");
  const std::string corpus = dir / "corpus.txt";
  ggtrain::test_support::write_synthetic_corpus(corpus, 400);

  train::TrainOptions o;
  o.run_dir = dir / "run";
  o.config = ggtrain::test_support::tiny_run_config(corpus, 3);
  o.config.data.tokenizer = dir / "tokenizer.json";
  o.quiet = true;
  const auto summary = train::run_training(o);
  ASSERT_FALSE(summary.final_weights.empty());
  const gguf::GgufFile ck(summary.final_weights);
  EXPECT_EQ(ck.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(ck.get_uint("llama.vocab_size"), uint64_t(n_tokens));
  EXPECT_FALSE(ck.get_bool_or("tokenizer.ggml.add_space_prefix", true));
  const auto t = tokenizer::Tokenizer::from_gguf(gguf::GgufFile(o.run_dir + "/tokenizer.gguf"));
  const auto the = t.encode("the", false);  // "th" merges first, and "the" is no piece
  ASSERT_EQ(the.size(), 2u);
  EXPECT_EQ(t.piece(the[0]), "th");
  EXPECT_EQ(t.piece(the[1]), "e");
  corpus::TokenFile train(o.run_dir + "/data/train-00000.tok");
  EXPECT_EQ(train.vocab(), n_tokens);
  EXPECT_EQ(train[0], 2) << "documents start with BOS";
  o.resume = true;
  o.config.train.steps = 4;
  EXPECT_EQ(train::run_training(o).last_step, 4);
}
