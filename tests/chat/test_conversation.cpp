// chat/conversation: the record formats a conversation is read from and the
// rules that name the message at fault.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/conversation.h"
#include "support/files.h"

using namespace ggtrain;
using namespace ggtrain::chat;
using test_support::error_of;

TEST(ChatConversations, RecordFormats) {
  using nlohmann::json;
  const json chat_rec =
      json::parse(R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})");
  const json alpaca = json::parse(R"({"instruction": "Add", "input": "1 2", "output": "3"})");
  const json alpaca_no_input = json::parse(R"({"instruction": "Say hi", "input": "", "output": "hi"})");
  const json completion = json::parse(R"({"prompt": "2+2=", "completion": "4"})");
  EXPECT_EQ(detect_record_format(chat_rec, "f:1"), RecordFormat::kChat);
  EXPECT_EQ(detect_record_format(alpaca, "f:1"), RecordFormat::kAlpaca);
  EXPECT_EQ(detect_record_format(completion, "f:1"), RecordFormat::kCompletion);
  EXPECT_EQ(conversation_of(chat_rec, RecordFormat::kChat, "f:1")[1].content, "b");
  const Conversation a = conversation_of(alpaca, RecordFormat::kAlpaca, "f:1");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].content, "Add\n\n1 2");
  EXPECT_EQ(a[1].content, "3");
  EXPECT_EQ(conversation_of(alpaca_no_input, RecordFormat::kAlpaca, "f:1")[0].content, "Say hi");
  EXPECT_EQ(conversation_of(completion, RecordFormat::kCompletion, "f:1")[1].content, "4");
  EXPECT_NE(error_of([&] { conversation_of(completion, RecordFormat::kChat, "f:7"); }).find("f:7: member \"messages\""),
            std::string::npos);
  EXPECT_NE(error_of([] { detect_record_format(nlohmann::json::array(), "f:2"); }).find("f:2"), std::string::npos);
}

// ShareGPT's records read as chat ones: human/gpt/system turns in
// "conversations"; a speaker it has no role for is named.
TEST(ChatConversations, ShareGptRecords) {
  using nlohmann::json;
  const json sharegpt =
      json::parse(R"({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"},)"
                  R"( {"from": "gpt", "value": "a"}]})");
  EXPECT_EQ(detect_record_format(sharegpt, "f:1"), RecordFormat::kChat);
  const Conversation c = conversation_of(sharegpt, RecordFormat::kChat, "f:1");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].role, "system");
  EXPECT_EQ(c[1].role, "user");
  EXPECT_EQ(c[1].content, "q");
  EXPECT_EQ(c[2].role, "assistant");
  const json tool =
      json::parse(R"({"conversations": [{"from": "human", "value": "q"}, {"from": "function_call", "value": "{}"}]})");
  EXPECT_NE(error_of([&] {
              conversation_of(tool, RecordFormat::kChat, "f:9");
            }).find("f:9: conversations[1]: \"from\" is \"function_call\""),
            std::string::npos);
}

// What a record holds that no conversation reads is named, so it can be said:
// a reasoning trace, a message's name; never what is read (tool definitions
// and calls are).
TEST(ChatConversations, IgnoredMembersAreNamed) {
  using nlohmann::json;
  using Names = std::vector<std::string>;
  const json chat_rec = json::parse(
      R"({"tools": [], "messages": [{"role": "user", "content": "a", "name": "x"},)"
      R"( {"role": "assistant", "content": "b", "reasoning_content": "because"},)"
      R"( {"role": "user", "content": "c"}, {"role": "assistant", "content": "d", "reasoning_content": "so"}]})");
  EXPECT_EQ(ignored_members(chat_rec, RecordFormat::kChat), (Names{"messages[].name", "messages[].reasoning_content"}));
  const json plain =
      json::parse(R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})");
  EXPECT_EQ(ignored_members(plain, RecordFormat::kChat), Names{});
  const json sharegpt =
      json::parse(R"({"id": 7, "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]})");
  EXPECT_EQ(ignored_members(sharegpt, RecordFormat::kChat), Names{"id"});
  EXPECT_EQ(ignored_members(json::parse(R"({"instruction": "i", "input": "", "output": "o", "source": "s"})"),
                            RecordFormat::kAlpaca),
            Names{"source"});
  EXPECT_EQ(
      ignored_members(json::parse(R"({"prompt": "p", "chosen": "a", "rejected": "b", "score": 3})"), std::nullopt),
      Names{"score"});
  EXPECT_EQ(ignored_members(json::parse(R"({"prompt": "p", "chosen": {"role": "assistant", "content": "a", )"
                                        R"("reasoning_content": "r"}, "rejected": "b"})"),
                            std::nullopt),
            Names{"chosen[].reasoning_content"});
}

TEST(ChatConversations, RulesNameTheMessage) {
  auto err = [](const Conversation& c, bool training) {
    return error_of([&] { check_conversation(c, training, "x:3"); });
  };
  EXPECT_EQ(err({{"system", "s"}, {"user", "u"}, {"assistant", "a"}}, true), "");
  EXPECT_EQ(err({{"user", "u"}}, false), "");
  EXPECT_EQ(err({}, true), "x:3: the conversation has no messages");
  EXPECT_EQ(err({{"user", "u"}, {"bot", "a"}}, true),
            "x:3: message 1 has role \"bot\" (system, user, assistant or tool)");
  EXPECT_EQ(err({{"user", "u"}, {"user", "v"}}, true),
            "x:3: message 1 is a user turn where an assistant turn belongs (turns alternate from user)");
  EXPECT_EQ(err({{"user", "u"}, {"system", "s"}}, true),
            "x:3: message 1 is a system message; only the first may be one");
  EXPECT_EQ(err({{"user", "u"}}, true), "x:3: the conversation ends without an assistant turn (nothing to learn from)");
  EXPECT_EQ(err({{"user", "u"}, {"assistant", "a"}}, false),
            "x:3: the conversation must end with a user turn (or a tool's output)");
  EXPECT_EQ(err({{"user", " \n\t"}, {"assistant", "a"}}, true), "x:3: message 0 (user) has empty content");
}
