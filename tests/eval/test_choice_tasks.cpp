// eval/choice_tasks: the multiple-choice task readers (llama-perplexity's
// binary --multiple-choice files, the HellaSwag text form, JSONL, the
// Winogrande CSV) and the draw of a subset.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "eval/choice_tasks.h"
#include "support/files.h"

namespace ggtrain {
namespace {

using eval::ChoiceTask;
using test_support::error_of;

// A --multiple-choice file written here byte by byte, as llama.cpp's
// reader expects it: count, positions, then per task the question, the
// answers and their int32 labels, and a second (ignored) answer list.
struct McWriter {
  std::string bytes;
  void u32(uint32_t v) { bytes.append(reinterpret_cast<const char*>(&v), 4); }
  void text(const std::string& s) {
    u32(uint32_t(s.size()));
    bytes += s;
  }
  std::string task(const std::string& q, const std::vector<std::string>& answers, const std::vector<int>& labels) {
    McWriter t;
    t.text(q);
    t.u32(uint32_t(answers.size()));
    for (const auto& a : answers) t.text(a);
    for (int l : labels) t.u32(uint32_t(l));
    t.u32(1);  // one "mc2" answer, read and ignored
    t.text("ignored");
    t.u32(1);
    return t.bytes;
  }
  static std::string file(const std::vector<std::string>& tasks) {
    McWriter f;
    f.u32(uint32_t(tasks.size()));
    uint32_t at = 4 + 4 * uint32_t(tasks.size());
    for (const auto& t : tasks) {
      f.u32(at);
      at += uint32_t(t.size());
    }
    for (const auto& t : tasks) f.bytes += t;
    return f.bytes;
  }
};

TEST(ChoiceTasks, ReadsTheMultipleChoiceFile) {
  McWriter w;
  const std::string bytes =
      McWriter::file({w.task("Q one?", {"a", "b", "c"}, {0, 0, 1}), w.task("Q two?", {"yes", "no"}, {1, 0})});
  const auto tasks = eval::parse_multiple_choice(bytes, "t.bin");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].context, "Q one?");
  EXPECT_EQ(tasks[0].endings, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(tasks[0].gold, 2);
  EXPECT_EQ(tasks[1].index, 1);
  EXPECT_EQ(tasks[1].gold, 0);
  EXPECT_EQ(eval::task_format_named("", "arc.bin"), eval::TaskFormat::kMultipleChoice);
  EXPECT_NE(error_of([] { eval::task_format_named("winogrand", "w.csv"); }).find("(did you mean 'winogrande'?)"),
            std::string::npos);
}

TEST(ChoiceTasks, MultipleChoiceErrorsNameFileTaskAndField) {
  McWriter w;
  const std::string good = w.task("Q?", {"a", "b"}, {0, 1});
  const std::string file = McWriter::file({good});
  auto err = [](const std::string& bytes) { return error_of([&] { eval::parse_multiple_choice(bytes, "t.bin"); }); };
  EXPECT_NE(err(file.substr(0, file.size() - 6)).find("t.bin: task 0"), std::string::npos);  // truncated
  EXPECT_NE(err(file.substr(0, file.size() - 6)).find("truncated"), std::string::npos);
  EXPECT_NE(err(std::string("\xff\xff\xff\x7f", 4)).find("task positions"), std::string::npos);  // 2^31 tasks, no room
  EXPECT_NE(err(McWriter::file({w.task("Q?", {"a", "b"}, {1, 1})})).find("2 answers are labelled right"),
            std::string::npos);
  EXPECT_NE(err(McWriter::file({w.task("Q?", {"a", "b"}, {0, 7})})).find("label is 7"), std::string::npos);
  EXPECT_NE(err(McWriter::file({w.task("Q?", {"a"}, {1})})).find("at least 2"), std::string::npos);
  EXPECT_NE(err(McWriter::file({w.task("Q?", {"a", "\xff"}, {1, 0})})).find("not UTF-8"), std::string::npos);
  std::string far = file;
  far[4] = '\x7f';  // the first task's position past the end
  EXPECT_NE(err(far).find("past the file"), std::string::npos);
  McWriter many;
  many.text("Q?");
  many.u32(101);
  EXPECT_NE(err(McWriter::file({many.bytes})).find("at most 100"), std::string::npos);
}

TEST(ChoiceTasks, ReadsTheHellaswagForm) {
  const auto tasks = eval::parse_hellaswag("ctx one\n2\na\nb\nc\nd\nctx two\r\n0\ne\nf\ng\nh", "t.txt");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].context, "ctx one");
  EXPECT_EQ(tasks[0].gold, 2);
  EXPECT_EQ(tasks[0].endings, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(tasks[1].index, 1);
  EXPECT_EQ(tasks[1].context, "ctx two\r");  // as llama-perplexity's getline keeps it
  EXPECT_EQ(tasks[1].endings.back(), "h");
}

TEST(ChoiceTasks, HellaswagFormErrorsNameFileAndLine) {
  EXPECT_NE(
      error_of([] { eval::parse_hellaswag("c\n1\na\nb\nc\n", "t.txt"); }).find("t.txt: 5 lines, not a multiple of 6"),
      std::string::npos);
  EXPECT_NE(error_of([] { eval::parse_hellaswag("c\n4\na\nb\nc\nd\n", "t.txt"); }).find("t.txt:2: the gold ending"),
            std::string::npos);
  EXPECT_NE(error_of([] { eval::parse_hellaswag("c\nx\na\nb\nc\nd\n", "t.txt"); }).find("t.txt:2:"), std::string::npos);
  EXPECT_NE(error_of([] { eval::parse_hellaswag("c\n1\na\nb\n\xff\nd\n", "t.txt"); }).find("t.txt:5: byte 1"),
            std::string::npos);
}

TEST(ChoiceTasks, ReadsTheJsonlForm) {
  const auto tasks =
      eval::parse_choice_jsonl("{\"context\": \"c\", \"endings\": [\"x\", \"y\", \"z\"], \"label\": 2}\n\n"
                               "{\"label\": 0, \"endings\": [\"p\", \"q\"], \"context\": \"d\"}\n",
                               "t.jsonl");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].endings.size(), 3u);
  EXPECT_EQ(tasks[0].gold, 2);
  EXPECT_EQ(tasks[1].index, 1);
  EXPECT_EQ(tasks[1].context, "d");
}

TEST(ChoiceTasks, JsonlErrorsNameFileLineAndField) {
  auto err = [](const char* text) { return error_of([&] { eval::parse_choice_jsonl(text, "t.jsonl"); }); };
  EXPECT_NE(err("{\"endings\": [\"a\", \"b\"], \"label\": 0}").find("t.jsonl:1: no \"context\""), std::string::npos);
  EXPECT_NE(err("\n{\"context\": \"c\", \"endings\": [\"a\", \"b\"], \"label\": 2}").find("t.jsonl:2: \"label\""),
            std::string::npos);
  EXPECT_NE(err("{\"context\": \"c\", \"endings\": [\"a\"], \"label\": 0}").find("\"endings\""), std::string::npos);
  EXPECT_NE(err("{\"context\": \"c\", \"endings\": [\"a\", \"\"], \"label\": 0}").find("non-empty"), std::string::npos);
  EXPECT_NE(err("{\"context\": \"c\", ").find("t.jsonl:1: not a JSON object"), std::string::npos);
  EXPECT_NE(err("[1, 2]").find("t.jsonl:1: not a JSON object"), std::string::npos);
}

TEST(ChoiceTasks, TheDrawIsFixedAndTakesEachTaskOnce) {
  std::vector<ChoiceTask> tasks(20);
  for (int i = 0; i < 20; ++i) tasks[size_t(i)].index = i;
  const auto all = eval::draw_tasks(tasks, 0);
  std::set<int64_t> seen;
  for (const auto& t : all) seen.insert(t.index);
  EXPECT_EQ(all.size(), 20u);
  EXPECT_EQ(seen.size(), 20u);
  bool in_file_order = true;
  for (size_t i = 0; i < all.size(); ++i) in_file_order = in_file_order && all[i].index == int64_t(i);
  EXPECT_FALSE(in_file_order);  // drawn, as llama-perplexity draws even a whole file
  // Fewer tasks: the first ones of the same draw.
  const auto five = eval::draw_tasks(tasks, 5);
  ASSERT_EQ(five.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(five[i].index, all[i].index);
  EXPECT_EQ(eval::draw_tasks(tasks, 50).size(), 20u);
}

TEST(ChoiceTasks, ReadsTheWinograndeCsv) {
  const auto tasks = eval::parse_winogrande("index,sentence,option1,option2,answer\n"
                                            "0,\"Sarah, not Maria, got the _ cases.\",easier,harder,1\n"
                                            "1,The _ sat.,cat,dog,2\r\n",
                                            "w.csv");
  ASSERT_EQ(tasks.size(), 2u);  // the header skipped
  EXPECT_EQ(tasks[0].context, "Sarah, not Maria, got the ");
  EXPECT_EQ(tasks[0].after, " cases.");
  EXPECT_EQ(tasks[0].endings, (std::vector<std::string>{"easier", "harder"}));
  EXPECT_EQ(tasks[0].gold, 0);
  EXPECT_EQ(tasks[0].rule, eval::ChoiceRule::kWinogrande);
  EXPECT_EQ(tasks[1].gold, 1);
  EXPECT_EQ(tasks[1].index, 1);
  auto err = [](const char* text) { return error_of([&] { eval::parse_winogrande(text, "w.csv"); }); };
  EXPECT_NE(err("0,The _ sat.,cat,dog,1\n1,The _ sat.,cat,dog,3\n").find("w.csv:2: the answer must be 1 or 2"),
            std::string::npos);
  EXPECT_NE(err("0,The cat sat.,cat,dog,1\n").find("w.csv:1: the sentence has no '_'"), std::string::npos);
  EXPECT_NE(err("0,The _ sat.,cat\n").find("w.csv:1: not index,sentence"), std::string::npos);
}

TEST(ChoiceTasks, WinograndeKeepsFileOrderUnlessFewerAreAskedFor) {
  std::vector<ChoiceTask> tasks(10);
  for (int i = 0; i < 10; ++i) tasks[size_t(i)].index = i;
  const auto all = eval::draw_tasks(tasks, 0, eval::TaskFormat::kWinogrande);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].index, int64_t(i));
  const auto some = eval::draw_tasks(tasks, 6, eval::TaskFormat::kWinogrande);
  std::set<int64_t> seen;
  for (const auto& t : some) seen.insert(t.index);
  EXPECT_EQ(some.size(), 6u);
  EXPECT_EQ(seen.size(), 6u);
  const auto again = eval::draw_tasks(tasks, 6, eval::TaskFormat::kWinogrande);
  for (size_t i = 0; i < some.size(); ++i) EXPECT_EQ(again[i].index, some[i].index);
}

}  // namespace
}  // namespace ggtrain
