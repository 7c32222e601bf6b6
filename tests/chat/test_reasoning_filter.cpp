// The reasoning block a chat leaves out of what it shows, however the
// reply's pieces cut the markers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/reasoning_filter.h"

using ggtrain::chat::ReasoningFilter;

namespace {

std::string shown(const std::vector<std::string>& pieces) {
  ReasoningFilter f;
  std::string out;
  for (const auto& p : pieces) out += f.feed(p);
  return out + f.flush();
}

}  // namespace

TEST(ReasoningFilter, EmptyBlockAndItsBlankLinesAreLeftOut) {  // Qwen3's non-thinking replies
  EXPECT_EQ(shown({"<think>", "\n\n", "</think>", "\n\n", "Hello", " there."}), "Hello there.");
}

TEST(ReasoningFilter, MarkersCutAcrossPieces) {
  EXPECT_EQ(shown({"<th", "ink>plan: a", " then b</th", "ink>", "\n", "The answer is 4."}), "The answer is 4.");
  EXPECT_EQ(shown({"a <", "b> c"}), "a <b> c");  // a '<' that is no marker is shown
  EXPECT_EQ(shown({"x <thi"}), "x <thi");  // held text is shown at the end
}

TEST(ReasoningFilter, TextAroundTheBlockStays) {
  EXPECT_EQ(shown({"Sure. <think>hidden</think> Done."}), "Sure. Done.");
  EXPECT_EQ(shown({"no reasoning at all"}), "no reasoning at all");
  EXPECT_EQ(shown({"<think>unfinished"}), "");  // cut mid-reasoning: nothing to show
}

// Qwen3.5's prompt ends with "<think>\n": the reply starts inside the block,
// which only its "</think>" closes.
TEST(ReasoningFilter, ReplyThatStartsInsideTheBlock) {
  ReasoningFilter f(/*in_reasoning=*/true);
  std::string out;
  for (const char* p : {"The user asks", " for 4.\n</th", "ink>\n\n", "It is 4."}) out += f.feed(p);
  EXPECT_EQ(out + f.flush(), "It is 4.");
  EXPECT_EQ(shown({"The user asks for 4.\n</think>\n\nIt is 4."}), "The user asks for 4.\n</think>\n\nIt is 4.");
}
