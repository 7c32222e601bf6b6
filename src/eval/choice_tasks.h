#pragma once
// Multiple-choice tasks, read from the files llama.cpp's llama-perplexity
// reads and from a plain JSONL form: HellaSwag-like (a context and its
// possible endings, one of them right) and Winogrande (a sentence with a
// blank and two words for it).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ggtrain::eval {

// How a task's choices are scored (eval/choice_score.h).
enum class ChoiceRule {
  kEnding,  // each ending after the context
  kWinogrande  // context + choice + after; the words after the choice
};

struct ChoiceTask {
  int64_t index = 0;  // its place in the file, from 0
  std::string context;  // Winogrande: the sentence up to its blank
  std::vector<std::string> endings;  // at least two; Winogrande: the two words for the blank
  int gold = 0;  // the right ending
  ChoiceRule rule = ChoiceRule::kEnding;
  std::string after;  // Winogrande: the sentence after its blank
};

enum class TaskFormat { kHellaswag, kJsonl, kWinogrande, kMultipleChoice };

// "hellaswag", "winogrande", "multiple-choice" or "jsonl"; "" takes it from
// the file name (a .jsonl file is JSONL, a .csv one Winogrande, a .bin one
// multiple choice, anything else the HellaSwag text form). Error naming
// --task-format.
TaskFormat task_format_named(std::string_view name, std::string_view path);

// The HellaSwag text form of llama-perplexity --hellaswag: six lines per
// task: the context, the gold ending's index (0-3), then the four endings.
// The JSONL form: one object per line, {"context": TEXT, "endings": [TEXT,
// ...], "label": K}; blank lines are skipped. Text must be UTF-8. Errors
// name FILE:LINE and the field.
std::vector<ChoiceTask> read_choice_tasks(const std::string& path, TaskFormat format);
std::vector<ChoiceTask> parse_hellaswag(std::string_view text, const std::string& path);
std::vector<ChoiceTask> parse_choice_jsonl(std::string_view text, const std::string& path);
// llama-perplexity --winogrande's CSV: index,sentence,choice1,choice2,answer
// (1 or 2) per line, the sentence quoted when it holds commas and its blank
// a "_". A first line whose answer is not a number is a header and skipped.
std::vector<ChoiceTask> parse_winogrande(std::string_view text, const std::string& path);

// The tasks llama-perplexity scores with --hellaswag-tasks N: N of them
// drawn without replacement by std::mt19937(1) and
// std::uniform_int_distribution over those left, in the order drawn (it
// draws even when N covers the file). n <= 0: all of them, drawn so.
std::vector<ChoiceTask> draw_tasks(std::vector<ChoiceTask> tasks, int64_t n);
// llama-perplexity --multiple-choice's binary file (ARC, MMLU, TruthfulQA):
// little-endian uint32 task count, then each task's byte position, then
// per task: the question, its answers (a uint32 count of at most 100, each
// a uint32 length and the text, then an int32 label per answer, 1 right and
// 0 wrong), then a second such list (several right answers; read and
// ignored, as llama-perplexity does). Each answer is scored after the
// question and a space, as an ending (ChoiceRule::kEnding); exactly one
// answer of the first list must be right. Errors name FILE, the task and
// the field.
std::vector<ChoiceTask> parse_multiple_choice(std::string_view bytes, const std::string& path);
// --winogrande-tasks N (and --multiple-choice-tasks N): all in file order unless 0 < N < the file's tasks;
// then N drawn by std::mt19937(1) scaled in float, each taken from a list
// whose last entry fills its place.
std::vector<ChoiceTask> draw_winogrande_tasks(std::vector<ChoiceTask> tasks, int64_t n);
// The draw of the format's tool.
std::vector<ChoiceTask> draw_tasks(std::vector<ChoiceTask> tasks, int64_t n, TaskFormat format);

}  // namespace ggtrain::eval
