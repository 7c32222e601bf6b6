#include "eval/choice_tasks.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "util/error.h"
#include "util/suggest.h"
#include "util/utf8.h"

namespace ggtrain::eval {

namespace {

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read the task file ({})", path, errno_text(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file's lines as std::getline splits them on '\n' (llama-perplexity
// reads its task files so: a '\r' stays in the line).
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

void check_text(std::string_view line, const std::string& path, size_t line_no) {
  const int64_t bad = first_invalid_utf8(line.data(), line.size());
  if (bad >= 0) fail("{}:{}: byte {} of the line is not UTF-8 text; task files are UTF-8", path, line_no, bad + 1);
}

int parse_label(std::string_view s, int n_endings, const std::string& where) {
  int v = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9' && i < 4; ++i) v = v * 10 + (s[i] - '0');
  if (i == 0 || i != s.size() || v >= n_endings)
    fail("{}: the gold ending's index must be a number from 0 to {}, not '{}'", where, n_endings - 1, s);
  return v;
}

const nlohmann::json& field(const nlohmann::json& obj, const char* name, const std::string& where) {
  auto it = obj.find(name);
  if (it == obj.end())
    fail("{}: no \"{}\" (a task is {{\"context\": ..., \"endings\": [...], \"label\": K}})", where, name);
  return *it;
}

}  // namespace

TaskFormat task_format_named(std::string_view name, std::string_view path) {
  if (name == "hellaswag") return TaskFormat::kHellaswag;
  if (name == "jsonl") return TaskFormat::kJsonl;
  if (name == "winogrande") return TaskFormat::kWinogrande;
  if (name == "multiple-choice") return TaskFormat::kMultipleChoice;
  if (name.empty())
    return path.ends_with(".jsonl") ? TaskFormat::kJsonl
           : path.ends_with(".csv") ? TaskFormat::kWinogrande
           : path.ends_with(".bin") ? TaskFormat::kMultipleChoice
                                    : TaskFormat::kHellaswag;
  fail("--task-format: '{}' is not a task format{} (hellaswag, winogrande, multiple-choice, jsonl)", name,
       did_you_mean(name, {"hellaswag", "winogrande", "multiple-choice", "jsonl"}));
}

std::vector<ChoiceTask> read_choice_tasks(const std::string& path, TaskFormat format) {
  const std::string text = read_whole(path);
  auto tasks = format == TaskFormat::kJsonl            ? parse_choice_jsonl(text, path)
               : format == TaskFormat::kWinogrande     ? parse_winogrande(text, path)
               : format == TaskFormat::kMultipleChoice ? parse_multiple_choice(text, path)
                                                       : parse_hellaswag(text, path);
  if (tasks.empty()) fail("{}: no tasks in the file", path);
  return tasks;
}

std::vector<ChoiceTask> parse_hellaswag(std::string_view text, const std::string& path) {
  constexpr size_t kLines = 6, kEndings = 4;
  const auto lines = split_lines(text);
  if (lines.size() % kLines != 0)
    fail("{}: {} lines, not a multiple of 6; the HellaSwag form is six lines per task (context, gold index 0-3, "
         "four endings)",
         path, lines.size());
  std::vector<ChoiceTask> tasks(lines.size() / kLines);
  for (size_t t = 0; t < tasks.size(); ++t) {
    const size_t first = t * kLines;
    for (size_t k = 0; k < kLines; ++k) check_text(lines[first + k], path, first + k + 1);
    ChoiceTask& task = tasks[t];
    task.index = int64_t(t);
    task.context = lines[first];
    task.gold = parse_label(lines[first + 1], kEndings, fmt::format("{}:{}", path, first + 2));
    for (size_t e = 0; e < kEndings; ++e) task.endings.emplace_back(lines[first + 2 + e]);
  }
  return tasks;
}

std::vector<ChoiceTask> parse_choice_jsonl(std::string_view text, const std::string& path) {
  std::vector<ChoiceTask> tasks;
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = fmt::format("{}:{}", path, i + 1);
    if (lines[i].find_first_not_of(" \t\r") == std::string_view::npos) continue;
    check_text(lines[i], path, i + 1);
    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(lines[i]);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: not a JSON object ({})", where, e.what());
    }
    if (!obj.is_object()) fail("{}: not a JSON object", where);
    const auto& context = field(obj, "context", where);
    const auto& endings = field(obj, "endings", where);
    const auto& label = field(obj, "label", where);
    if (!context.is_string()) fail("{}: \"context\" must be a string", where);
    if (!endings.is_array() || endings.size() < 2)
      fail("{}: \"endings\" must be an array of at least two non-empty strings", where);
    ChoiceTask task;
    task.index = int64_t(tasks.size());
    task.context = context.get<std::string>();
    for (const auto& e : endings) {
      if (!e.is_string() || e.get_ref<const std::string&>().empty())
        fail("{}: \"endings\" must be an array of at least two non-empty strings", where);
      task.endings.push_back(e.get<std::string>());
    }
    if (!label.is_number_integer() || label.get<int64_t>() < 0 || label.get<int64_t>() >= int64_t(task.endings.size()))
      fail("{}: \"label\" must be the index of the right ending, 0 to {}", where, task.endings.size() - 1);
    task.gold = label.get<int>();
    tasks.push_back(std::move(task));
  }
  return tasks;
}

std::vector<ChoiceTask> parse_winogrande(std::string_view text, const std::string& path) {
  std::vector<ChoiceTask> tasks;
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const std::string where = fmt::format("{}:{}", path, i + 1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    check_text(line, path, i + 1);
    // The first four commas outside double quotes, as llama-perplexity finds them.
    size_t comma[4], found = 0;
    bool quoted = false;
    for (size_t k = 0; k < line.size() && found < 4; ++k) {
      if (line[k] == '"') quoted = !quoted;
      else if (line[k] == ',' && !quoted) comma[found++] = k;
    }
    if (found < 4) fail("{}: not index,sentence,choice1,choice2,answer (found {} commas outside quotes)", where, found);
    std::string_view sentence = line.substr(comma[0] + 1, comma[1] - comma[0] - 1);
    if (sentence.size() >= 2 && sentence.front() == '"' && sentence.back() == '"')
      sentence = sentence.substr(1, sentence.size() - 2);
    std::string_view answer = line.substr(comma[3] + 1);
    if (answer.ends_with('\r')) answer.remove_suffix(1);
    if (answer != "1" && answer != "2") {
      if (tasks.empty() && i == 0) continue;  // a header line
      fail("{}: the answer must be 1 or 2, not '{}'", where, answer);
    }
    const size_t blank = sentence.find('_');
    if (blank == std::string_view::npos) fail("{}: the sentence has no '_' (the blank the choices fill)", where);
    ChoiceTask task;
    task.index = int64_t(tasks.size());
    task.rule = ChoiceRule::kWinogrande;
    task.context = sentence.substr(0, blank);
    task.after = sentence.substr(blank + 1);
    task.endings = {std::string(line.substr(comma[1] + 1, comma[2] - comma[1] - 1)),
                    std::string(line.substr(comma[2] + 1, comma[3] - comma[2] - 1))};
    task.gold = answer == "1" ? 0 : 1;
    tasks.push_back(std::move(task));
  }
  return tasks;
}

std::vector<ChoiceTask> draw_winogrande_tasks(std::vector<ChoiceTask> tasks, int64_t n) {
  if (n <= 0 || size_t(n) >= tasks.size()) return tasks;
  std::mt19937 rng(1);
  std::vector<size_t> left(tasks.size());
  for (size_t i = 0; i < left.size(); ++i) left[i] = i;
  const float scale = 1 / (1.f + float(rng.max()));
  std::vector<ChoiceTask> drawn;
  for (int64_t i = 0; i < n; ++i) {
    // (llama-perplexity would read past its list where the float product rounds up to its size)
    const size_t j = std::min(size_t(scale * float(rng()) * float(left.size())), left.size() - 1);
    drawn.push_back(std::move(tasks[left[j]]));
    left[j] = left.back();
    left.pop_back();
  }
  return drawn;
}

std::vector<ChoiceTask> draw_tasks(std::vector<ChoiceTask> tasks, int64_t n, TaskFormat format) {
  // llama-perplexity draws Winogrande and multiple-choice tasks alike
  return format == TaskFormat::kWinogrande || format == TaskFormat::kMultipleChoice
             ? draw_winogrande_tasks(std::move(tasks), n)
             : draw_tasks(std::move(tasks), n);
}

std::vector<ChoiceTask> draw_tasks(std::vector<ChoiceTask> tasks, int64_t n) {
  const size_t count = n <= 0 || size_t(n) > tasks.size() ? tasks.size() : size_t(n);
  std::mt19937 rng(1);
  std::vector<ChoiceTask> drawn;
  drawn.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    std::uniform_int_distribution<size_t> dist(0, tasks.size() - 1);
    const size_t idx = dist(rng);
    drawn.push_back(std::move(tasks[idx]));
    tasks.erase(tasks.begin() + std::ptrdiff_t(idx));
  }
  return drawn;
}

}  // namespace ggtrain::eval
