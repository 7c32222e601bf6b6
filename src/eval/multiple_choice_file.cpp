// llama-perplexity --multiple-choice's binary task file (the form of the
// ARC, MMLU and TruthfulQA sets at huggingface.co/datasets/ikawrakow/
// validation-datasets-for-llama.cpp), read as tools/perplexity/perplexity.cpp
// reads it, with every count and length checked against the file first.
#include <cstring>

#include "eval/choice_tasks.h"
#include "util/error.h"
#include "util/utf8.h"

namespace ggtrain::eval {

namespace {

// llama.cpp's limit on a task's answers.
constexpr uint32_t kMaxAnswers = 100;

// A little-endian reader over the file's bytes that fails, naming `path`
// and what it was reading, instead of reading past the end.
class Cursor {
 public:
  Cursor(std::string_view bytes, const std::string& path) : b_(bytes), path_(path) {}
  void seek(uint64_t at, const std::string& what) {
    if (at > b_.size()) fail("{}: {} starts at byte {}, past the file's {} bytes", path_, what, at, b_.size());
    at_ = size_t(at);
  }
  uint32_t u32(const std::string& what) {
    need(4, what);
    uint32_t v = 0;
    std::memcpy(&v, b_.data() + at_, 4);
    at_ += 4;
    return v;
  }
  std::string text(const std::string& what) {
    const uint32_t n = u32(what + "'s length");
    need(n, what);
    std::string s(b_.substr(at_, n));
    at_ += n;
    const int64_t bad = first_invalid_utf8(s.data(), s.size());
    if (bad >= 0) fail("{}: {}: byte {} is not UTF-8 text", path_, what, bad + 1);
    return s;
  }
  size_t at() const { return at_; }

 private:
  void need(uint64_t n, const std::string& what) {
    if (n > b_.size() - at_)
      fail("{}: {} needs {} bytes at byte {}, but the file ends {} bytes later (truncated?)", path_, what, n, at_,
           b_.size() - at_);
  }
  std::string_view b_;
  const std::string& path_;
  size_t at_ = 0;
};

struct Answers {
  std::vector<std::string> texts;
  std::vector<int32_t> labels;
};

// `what`: "task K (at byte P): answer", for messages (the cursor names the file).
Answers read_answers(Cursor& c, const std::string& what, const std::string& path) {
  Answers a;
  const uint32_t n = c.u32(what + " count");
  if (n > kMaxAnswers) fail("{}: {} count is {}; llama-perplexity reads at most {}", path, what, n, kMaxAnswers);
  for (uint32_t i = 0; i < n; ++i) a.texts.push_back(c.text(fmt::format("{} {}", what, i)));
  for (uint32_t i = 0; i < n; ++i) a.labels.push_back(int32_t(c.u32(fmt::format("{} {}'s label", what, i))));
  return a;
}

}  // namespace

std::vector<ChoiceTask> parse_multiple_choice(std::string_view bytes, const std::string& path) {
  Cursor c(bytes, path);
  const uint32_t n_tasks = c.u32("the task count");
  if (n_tasks == 0) fail("{}: the task count is 0", path);
  if (uint64_t(n_tasks) * 4 > bytes.size() - 4)
    fail("{}: {} tasks need {} bytes of task positions; the file has {} bytes", path, n_tasks, uint64_t(n_tasks) * 4,
         bytes.size());
  std::vector<uint32_t> positions(n_tasks);
  for (uint32_t t = 0; t < n_tasks; ++t) positions[t] = c.u32("a task position");
  std::vector<ChoiceTask> tasks(n_tasks);
  for (uint32_t t = 0; t < n_tasks; ++t) {
    const std::string task_at = fmt::format("task {} (at byte {})", t, positions[t]);
    const std::string where = path + ": " + task_at;
    c.seek(positions[t], fmt::format("task {}", t));
    ChoiceTask& task = tasks[t];
    task.index = t;
    task.context = c.text(task_at + ": the question");
    const Answers mc1 = read_answers(c, task_at + ": answer", path);
    const Answers mc2 = read_answers(c, task_at + ": second-list answer", path);
    (void)mc2;  // answers with several right ones: llama-perplexity reads and ignores them too
    if (task.context.empty()) fail("{}: the question is empty", where);
    if (mc1.texts.size() < 2) fail("{}: {} answers; a task needs at least 2", where, mc1.texts.size());
    int golds = 0;
    for (size_t i = 0; i < mc1.texts.size(); ++i) {
      if (mc1.texts[i].empty()) fail("{}: answer {} is empty", where, i);
      if (mc1.labels[i] != 0 && mc1.labels[i] != 1)
        fail("{}: answer {}'s label is {}, not 0 or 1", where, i, mc1.labels[i]);
      if (mc1.labels[i] == 1 && golds++ == 0) task.gold = int(i);
    }
    if (golds != 1) fail("{}: {} answers are labelled right; exactly one must be", where, golds);
    task.endings = mc1.texts;
  }
  return tasks;
}

}  // namespace ggtrain::eval
