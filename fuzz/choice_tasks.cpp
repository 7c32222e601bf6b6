// Fuzz target: multiple-choice task files (src/eval/choice_tasks.h), the
// files `eval --task` and train.eval_tasks read. The first byte picks the
// form (HellaSwag text, JSONL, Winogrande CSV, llama-perplexity's binary
// multiple-choice file); the rest is the file. Each parser accepts it or
// throws ggtrain::Error; accepted tasks hold together (two or more endings,
// Winogrande exactly two, the gold one among them, indices in file order),
// and every draw llama-perplexity would make picks distinct tasks of the
// file, as many as asked.
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "eval/choice_tasks.h"
#include "fuzz_util.h"
#include "util/error.h"

using namespace ggtrain;

namespace {

constexpr eval::TaskFormat kForms[] = {eval::TaskFormat::kHellaswag, eval::TaskFormat::kJsonl,
                                       eval::TaskFormat::kWinogrande, eval::TaskFormat::kMultipleChoice};

std::vector<eval::ChoiceTask> parse(eval::TaskFormat form, std::string_view bytes) {
  switch (form) {
    case eval::TaskFormat::kHellaswag: return eval::parse_hellaswag(bytes, "fuzz");
    case eval::TaskFormat::kJsonl: return eval::parse_choice_jsonl(bytes, "fuzz");
    case eval::TaskFormat::kWinogrande: return eval::parse_winogrande(bytes, "fuzz");
    case eval::TaskFormat::kMultipleChoice: return eval::parse_multiple_choice(bytes, "fuzz");
  }
  return {};
}

void check_tasks(eval::TaskFormat form, const std::vector<eval::ChoiceTask>& tasks) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    const eval::ChoiceTask& t = tasks[i];
    if (t.index != int64_t(i)) ggtrain_fuzz::finding("a task's index is not its place in the file");
    if (t.endings.size() < 2) ggtrain_fuzz::finding("a task with fewer than two endings was accepted");
    if (form == eval::TaskFormat::kWinogrande && t.endings.size() != 2)
      ggtrain_fuzz::finding("a Winogrande task without exactly two choices");
    if (t.gold < 0 || size_t(t.gold) >= t.endings.size()) ggtrain_fuzz::finding("the gold ending is not an ending");
    ggtrain_fuzz::sink(t.context.size() + t.after.size());
  }
}

void check_draws(eval::TaskFormat form, const std::vector<eval::ChoiceTask>& tasks) {
  const int64_t n = int64_t(tasks.size());
  for (const int64_t want : {int64_t(0), int64_t(1), n / 2, n, n + 3}) {
    const auto drawn = eval::draw_tasks(tasks, want, form);
    const int64_t expect = want <= 0 || want >= n ? n : want;
    if (int64_t(drawn.size()) != expect) ggtrain_fuzz::finding("a draw returned another number of tasks");
    std::set<int64_t> seen;
    for (const auto& t : drawn)
      if (t.index < 0 || t.index >= n || !seen.insert(t.index).second)
        ggtrain_fuzz::finding("a draw repeated a task or made one up");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const eval::TaskFormat form = kForms[data[0] % 4];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<eval::ChoiceTask> tasks;
  try {
    tasks = parse(form, bytes);
  } catch (const Error&) {
    return 0;
  }
  check_tasks(form, tasks);
  check_draws(form, tasks);
  return 0;
}
