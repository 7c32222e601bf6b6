#include "eval/choice_score.h"

#include <algorithm>
#include <cmath>

#include "util/clock.h"
#include "util/error.h"

namespace ggtrain::eval {

namespace {

// The first ending with the highest value (llama.cpp keeps the first of ties).
int argmax_first(const std::vector<double>& v) {
  int best = 0;
  for (int i = 1; i < int(v.size()); ++i)
    if (v[size_t(i)] > v[size_t(best)]) best = i;
  return best;
}

// How many leading tokens every sequence shares, leaving each at least one
// token of its own to score.
size_t shared_prefix(const std::vector<std::vector<int32_t>>& seqs) {
  size_t shortest = seqs[0].size();
  for (const auto& s : seqs) shortest = std::min(shortest, s.size());
  size_t n = 0;
  while (n + 1 < shortest && std::all_of(seqs.begin(), seqs.end(), [&](const auto& s) { return s[n] == seqs[0][n]; }))
    ++n;
  return n;
}

double stderr_of(double p, size_t n) { return n > 1 ? std::sqrt(p * (1 - p) / double(n - 1)) : 0.0; }

std::vector<int32_t> encode_ending(const tokenizer::Tokenizer& tok, const ChoiceTask& task, const std::string& ending) {
  if (task.rule == ChoiceRule::kWinogrande) return tok.encode(task.context + ending + task.after, tok.add_bos());
  return tok.encode(task.context + " " + ending, tok.add_bos());
}

// Winogrande: see the header. logits(s, p): sequence s's logits at position p
// (the shared prefix's last position from the prefix pass, the rest from s's own).
TaskScore score_winogrande(infer::Decoder& dec, const tokenizer::Tokenizer& tok, const ChoiceTask& task,
                           const std::vector<std::vector<int32_t>>& seqs, size_t prefix,
                           const std::vector<float>& prefix_logits) {
  const int64_t V = dec.config().vocab;
  constexpr size_t kMinTrailing = 3;
  const bool skip_choice = seqs[0].size() - prefix > kMinTrailing && seqs[1].size() - prefix > kMinTrailing;
  std::vector<std::vector<float>> rest(2);  // positions prefix.. of each sequence
  for (size_t s = 0; s < 2; ++s) {
    const int64_t n = int64_t(seqs[s].size() - prefix);
    dec.truncate(int64_t(prefix));
    dec.eval(seqs[s].data() + prefix, n, true);
    rest[s].assign(dec.logits(), dec.logits() + n * V);
  }
  auto logits = [&](size_t s, size_t p) {
    return p + 1 == prefix ? prefix_logits.data() : rest[s].data() + (p - prefix) * size_t(V);
  };
  TaskScore score;
  score.index = task.index;
  score.gold = task.gold;
  std::vector<double> mean(2);
  for (size_t s = 0; s < 2; ++s) {
    const auto& seq = seqs[s];
    size_t base = prefix;
    if (skip_choice) base = std::max(prefix, tok.encode(task.context + task.endings[s], tok.add_bos()).size());
    const size_t last = seq.size() - base > 1 ? 1 : 0;
    double sum = 0;
    int64_t n = 0;
    for (size_t j = base - 1; j < seq.size() - 1 - last; ++j, ++n) {
      // llama.cpp's batch hands the second sentence, at the prefix's last
      // position, the first sentence's last logits.
      const float* z = s == 1 && !skip_choice && j + 1 == prefix ? logits(0, seqs[0].size() - 1) : logits(s, j);
      sum += token_logprob(z, V, seq[j + 1]);
    }
    score.logprob.push_back(sum);
    score.scored.push_back(n);
    mean[s] = n > 0 ? sum / double(n) : -INFINITY;
  }
  score.chosen_norm = mean[0] > mean[1] ? 0 : 1;
  score.chosen_sum = score.logprob[0] > score.logprob[1] ? 0 : 1;
  return score;
}

TaskScore score_task(infer::Decoder& dec, const tokenizer::Tokenizer& tok, const ChoiceTask& task,
                     std::vector<float>& prefix_logits) {
  const int64_t V = dec.config().vocab;
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& ending : task.endings) seqs.push_back(encode_ending(tok, task, ending));
  size_t longest = 0;
  for (const auto& s : seqs) longest = std::max(longest, s.size());
  if (int64_t(longest) > dec.n_ctx())
    fail("task {}: an ending needs {} tokens with its context; the context is {} (raise -c)", task.index, longest,
         dec.n_ctx());
  const size_t prefix = shared_prefix(seqs);
  if (prefix == 0)
    fail("task {}: its endings share no first token (an empty context, and the vocabulary adds no BOS); "
         "give the task a context",
         task.index);

  dec.reset();
  dec.eval(seqs[0].data(), int64_t(prefix), false);
  std::copy(dec.logits(), dec.logits() + V, prefix_logits.begin());
  if (task.rule == ChoiceRule::kWinogrande) return score_winogrande(dec, tok, task, seqs, prefix, prefix_logits);

  TaskScore s;
  s.index = task.index;
  s.gold = task.gold;
  std::vector<double> mean(seqs.size());
  for (size_t e = 0; e < seqs.size(); ++e) {
    const auto& seq = seqs[e];
    double sum = token_logprob(prefix_logits.data(), V, seq[prefix]);
    const int64_t rest = int64_t(seq.size() - prefix) - 1;  // tokens whose next token is scored
    if (rest > 0) {
      dec.truncate(int64_t(prefix));
      dec.eval(seq.data() + prefix, rest, true);
      for (int64_t j = 0; j < rest; ++j) sum += token_logprob(dec.logits() + j * V, V, seq[prefix + 1 + size_t(j)]);
    }
    s.logprob.push_back(sum);
    s.scored.push_back(rest + 1);
    mean[e] = sum / double(rest + 1);
  }
  s.chosen_norm = argmax_first(mean);
  s.chosen_sum = argmax_first(s.logprob);
  return s;
}

}  // namespace

int64_t tokens_needed(const tokenizer::Tokenizer& tok, const std::vector<ChoiceTask>& tasks) {
  size_t longest = 0;
  for (const auto& task : tasks)
    for (const auto& ending : task.endings) longest = std::max(longest, encode_ending(tok, task, ending).size());
  return int64_t(longest);
}

double token_logprob(const float* logits, int64_t vocab, int32_t target) {
  double mx = logits[0];
  for (int64_t j = 1; j < vocab; ++j) mx = std::max(mx, double(logits[j]));
  double sum = 0;
  for (int64_t j = 0; j < vocab; ++j) sum += std::exp(double(logits[j]) - mx);
  return double(logits[target]) - mx - std::log(sum);
}

ChoiceTotals totals_of(const std::vector<TaskScore>& scores) {
  ChoiceTotals t;
  for (const TaskScore& s : scores) {
    t.tasks += 1;
    t.right += s.chosen_sum == s.gold;
    t.right_norm += s.chosen_norm == s.gold;
    t.gold_logprob += s.logprob[size_t(s.gold)] / double(s.scored[size_t(s.gold)]);
  }
  return t;
}

void set_accuracies(ChoiceResult& r, const ChoiceTotals& t) {
  if (t.tasks <= 0) return;
  const size_t n = size_t(t.tasks + 0.5);
  r.acc = t.right / t.tasks;
  r.acc_norm = t.right_norm / t.tasks;
  r.acc_stderr = stderr_of(r.acc, n);
  r.acc_norm_stderr = stderr_of(r.acc_norm, n);
  r.gold_logprob = t.gold_logprob / t.tasks;
}

ChoiceResult score_choice_tasks(infer::Decoder& dec, const tokenizer::Tokenizer& tok,
                                const std::vector<ChoiceTask>& tasks,
                                const std::function<void(const TaskScore&, double)>& on_task) {
  ChoiceResult r;
  std::vector<float> prefix_logits(size_t(dec.config().vocab));
  size_t right_norm = 0;
  const double t0 = now_seconds();
  for (const auto& task : tasks) {
    r.tasks.push_back(score_task(dec, tok, task, prefix_logits));
    const TaskScore& s = r.tasks.back();
    right_norm += s.chosen_norm == s.gold;
    if (on_task) on_task(s, double(right_norm) / double(r.tasks.size()));
  }
  r.seconds = now_seconds() - t0;
  set_accuracies(r, totals_of(r.tasks));
  return r;
}

}  // namespace ggtrain::eval
