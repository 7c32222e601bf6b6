#pragma once
// Multiple-choice accuracy scored as llama.cpp's llama-perplexity scores it
// (tools/perplexity/perplexity.cpp). ChoiceRule::kEnding, as hellaswag_score:
// each ending is tokenized as tokenize(context + " " + ending, add_special);
// the tokens all endings share are evaluated once and the endings continue
// that KV prefix; an ending's score is the mean log-probability of its
// tokens past the shared prefix (llama.cpp's acc_norm), and the ending with
// the highest score is the model's choice. Beside it, `acc` takes the sum of
// those log-probabilities (unnormalised, lm-evaluation-harness's acc).
// ChoiceRule::kWinogrande, as winogrande_score: the two sentences context +
// choice + after; when both run more than 3 tokens past their shared prefix
// only the tokens after the choice count, else those past the prefix; the
// last token is left out when more than one would count; the mean decides
// (choice 2 on a tie), and the second sentence's first scored token takes
// the logits llama.cpp's batch gives it there (those of the first
// sentence's last token when the choice itself is scored: a known slip in
// llama.cpp, kept so that the scores are its scores).
#include <cstdint>
#include <functional>
#include <vector>

#include "eval/choice_tasks.h"
#include "infer/decoder.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::eval {

struct TaskScore {
  int64_t index = 0;  // the task's place in its file
  int gold = 0;
  int chosen_norm = 0;  // by mean log-probability (acc_norm)
  int chosen_sum = 0;  // by summed log-probability (acc)
  std::vector<double> logprob;  // per ending: summed log-probability of its scored tokens
  std::vector<int64_t> scored;  // per ending: how many tokens were scored
};

struct ChoiceResult {
  std::vector<TaskScore> tasks;
  double acc = 0, acc_norm = 0;  // fractions of the tasks
  double acc_stderr = 0, acc_norm_stderr = 0;  // sqrt(p (1 - p) / (n - 1)), 0 for one task
  // The right endings' mean log-probability per scored token, averaged over
  // the tasks: a smooth curve where the accuracies move in steps.
  double gold_logprob = 0;
  double seconds = 0;
};

// What a ChoiceResult's numbers come from: sums that add up over shares of
// the tasks (the ranks of a data-parallel run each score some).
struct ChoiceTotals {
  double tasks = 0, right = 0, right_norm = 0;
  double gold_logprob = 0;  // sum over the tasks of the right ending's mean log-probability per token
};
ChoiceTotals totals_of(const std::vector<TaskScore>& scores);
// acc, acc_norm, their standard errors and gold_logprob of `r` from `t`.
void set_accuracies(ChoiceResult& r, const ChoiceTotals& t);

// Scores `tasks` in their order; on_task (optional) gets each task's score
// and the running acc_norm. Error naming the task when its longest ending
// does not fit in the decoder's context.
ChoiceResult score_choice_tasks(infer::Decoder& dec, const tokenizer::Tokenizer& tok,
                                const std::vector<ChoiceTask>& tasks,
                                const std::function<void(const TaskScore&, double)>& on_task = {});

// The longest token sequence (context and an ending) among the tasks: the
// context a decoder needs to score them.
int64_t tokens_needed(const tokenizer::Tokenizer& tok, const std::vector<ChoiceTask>& tasks);

// log softmax(logits)[target] in double.
double token_logprob(const float* logits, int64_t vocab, int32_t target);

}  // namespace ggtrain::eval
