#pragma once
// Multiple-choice tasks (HellaSwag-like: a context and its possible
// endings, one of them right), read from the files llama.cpp's
// llama-perplexity reads and from a plain JSONL form.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::eval {

struct ChoiceTask {
  int64_t index = 0;  // its place in the file, from 0
  std::string context;
  std::vector<std::string> endings;  // at least two
  int gold = 0;                      // the right ending
};

enum class TaskFormat { kHellaswag, kJsonl };

// "hellaswag" or "jsonl"; "" takes it from the file name (a .jsonl file is
// JSONL, anything else the HellaSwag text form). Error naming --task-format.
TaskFormat task_format_named(std::string_view name, std::string_view path);

// The HellaSwag text form of llama-perplexity --hellaswag: six lines per
// task: the context, the gold ending's index (0-3), then the four endings.
// The JSONL form: one object per line, {"context": TEXT, "endings": [TEXT,
// ...], "label": K}; blank lines are skipped. Text must be UTF-8. Errors
// name FILE:LINE and the field.
std::vector<ChoiceTask> read_choice_tasks(const std::string& path, TaskFormat format);
std::vector<ChoiceTask> parse_hellaswag(std::string_view text, const std::string& path);
std::vector<ChoiceTask> parse_choice_jsonl(std::string_view text, const std::string& path);

// The tasks llama-perplexity scores with --hellaswag-tasks N: N of them
// drawn without replacement by std::mt19937(1) and
// std::uniform_int_distribution over those left, in the order drawn (it
// draws even when N covers the file). n <= 0: all of them, drawn so.
std::vector<ChoiceTask> draw_tasks(std::vector<ChoiceTask> tasks, int64_t n);

}  // namespace ggtrain::eval
