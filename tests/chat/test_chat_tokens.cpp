// chat/chat_tokens: the template's control tokens in a vocabulary and the
// ids of a rendered prompt, as llama.cpp tokenizes them.
#include <gtest/gtest.h>

#include <fstream>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "chat/rendered_records.h"
#include "chat/template.h"
#include "gguf/reader.h"
#include "support/files.h"
#include "support/temp_dir.h"
#include "tokenizer/tokenizer.h"

using namespace ggtrain;
using namespace ggtrain::chat;
using test_support::error_of;

namespace {

tokenizer::Tokenizer spm() {
  return tokenizer::Tokenizer::from_gguf(gguf::GgufFile(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf"));
}

}  // namespace

TEST(ChatTokens, ControlTokensAreAddedAndParsedOnlyAsSpecial) {
  const tokenizer::Tokenizer base = spm();
  EXPECT_EQ(missing_markers(base, Template::kChatml), (std::vector<std::string>{"<|im_start|>", "<|im_end|>"}));
  const tokenizer::Tokenizer tok = base.with_control_tokens({"<|im_start|>", "<|im_end|>"});
  ASSERT_EQ(tok.vocab_size(), base.vocab_size() + 2);
  const int32_t start = tok.token_id("<|im_start|>"), end = tok.token_id("<|im_end|>");
  EXPECT_EQ(start, base.vocab_size());
  EXPECT_EQ(end, base.vocab_size() + 1);
  EXPECT_EQ(tok.token_type(start), tokenizer::kControl);
  EXPECT_TRUE(missing_markers(tok, Template::kChatml).empty());
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const auto special = tok.encode(text, tokenizer::EncodeOptions{.parse_special = true});
  const auto plain = tok.encode(text, false);
  EXPECT_EQ(special.front(), start);
  EXPECT_EQ(special.back(), end);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), start), 0);  // text stays text without parse_special
  EXPECT_EQ(tok.encode("hello world", false), base.encode("hello world", false));
  EXPECT_NE(error_of([&] { tok.with_control_tokens({"<|im_end|>"}); }).find("already a token"), std::string::npos);
  const tokenizer::Tokenizer gpt2 =
      tokenizer::Tokenizer::from_gguf(gguf::GgufFile(GGTRAIN_FIXTURES_DIR "/tiny-gpt2.gguf"));
  EXPECT_NE(error_of([&] { gpt2.with_control_tokens({"<|x|>"}); }).find("gpt2"), std::string::npos);
}

// A prompt is tokenized exactly as llama.cpp tokenizes the rendered
// conversation with the generation prompt; the answer's tokens (and the end
// marker) are the trained ones.
TEST(ChatTokens, PromptIdsAreThoseOfTheRenderedPrompt) {
  tokenizer::Tokenizer tok = spm().with_control_tokens({"<|im_start|>", "<|im_end|>"});
  const Conversation prompt{{"system", "Be brief."}, {"user", "Who made the heaven?"}};
  Conversation full = prompt;
  full.push_back({"assistant", "God made it."});
  const EncodedExample e = encode_spans(tok, render_spans(Template::kChatml, full, false));
  const auto expected_prompt = tok.encode(render(Template::kChatml, prompt, true),
                                          tokenizer::EncodeOptions{.add_bos = tok.add_bos(), .parse_special = true});
  ASSERT_GT(e.ids.size(), expected_prompt.size());
  EXPECT_EQ(std::vector<int32_t>(e.ids.begin(), e.ids.begin() + long(expected_prompt.size())), expected_prompt);
  std::vector<int32_t> trained;
  for (size_t i = 0; i < e.ids.size(); ++i)
    if (e.trained[i]) trained.push_back(e.ids[i]);
  EXPECT_TRUE(
      std::all_of(e.trained.begin(), e.trained.begin() + long(expected_prompt.size()), [](uint8_t t) { return !t; }));
  ASSERT_FALSE(trained.empty());
  EXPECT_EQ(trained.back(), tok.token_id("<|im_end|>"));
  trained.pop_back();
  EXPECT_EQ(tok.decode(trained), "God made it.");
  EXPECT_EQ(end_of_turn_id(tok, Template::kChatml), tok.token_id("<|im_end|>"));
}

// chat/rendered_records: a JSONL file's records rendered one after another,
// each as training encodes it; a bad record named by file:line.
TEST(RenderedRecords, EachRecordAsTrainingEncodesItInOrder) {
  test_support::TempDir tmp;
  const tokenizer::Tokenizer tok = spm().with_control_tokens({"<|im_start|>", "<|im_end|>"});
  {
    std::ofstream f(tmp / "d.jsonl");
    f << R"({"messages": [{"role": "user", "content": "Who made the heaven?"}, )"
         R"({"role": "assistant", "content": "God made it."}]})"
      << "\n\n"
      << R"({"instruction": "Name a river.", "output": "Jordan."})"
      << "\n";
  }
  const auto ids = rendered_record_tokens(tmp / "d.jsonl", tok, Template::kChatml);
  std::vector<int32_t> want;
  for (const Conversation& c : {Conversation{{"user", "Who made the heaven?"}, {"assistant", "God made it."}},
                                Conversation{{"user", "Name a river."}, {"assistant", "Jordan."}}}) {
    const auto e = encode_spans(tok, render_spans(Template::kChatml, c, false));
    want.insert(want.end(), e.ids.begin(), e.ids.end());
  }
  EXPECT_EQ(ids, want);
  std::ofstream(tmp / "bad.jsonl") << R"({"messages": []})"
                                   << "\n"
                                   << "not json\n";
  EXPECT_NE(error_of([&] { rendered_record_tokens(tmp / "bad.jsonl", tok, Template::kChatml); }).find("bad.jsonl:1"),
            std::string::npos);
  std::ofstream(tmp / "empty.jsonl") << "\n";
  EXPECT_NE(error_of([&] { rendered_record_tokens(tmp / "empty.jsonl", tok, Template::kChatml); }).find("no records"),
            std::string::npos);
}
