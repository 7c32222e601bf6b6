#include "train/preference_batch.h"

#include <algorithm>

#include "corpus/batch_loader.h"
#include "kernels/cross_entropy.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

// The spans of row b's documents that hold counted targets, in order.
void answer_spans(const int32_t* targets, const int32_t* doc_start, int64_t b, int64_t T,
                  std::vector<AnswerSpan>& out) {
  const int64_t row = b * T;
  for (int64_t i = 0; i < T;) {
    int64_t j = i + 1;
    while (j < T && doc_start[row + j] == doc_start[row + i]) ++j;
    const bool counted =
        std::any_of(targets + row + i, targets + row + j, [](int32_t t) { return t != corpus::kNoTarget; });
    if (counted) out.push_back({row + i, row + j});
    i = j;
  }
}

struct AnswerScore {
  double logp = 0;
  int64_t tokens = 0;
};

AnswerScore score(const AnswerSpan& s, const float* token_loss, const int32_t* targets) {
  AnswerScore a;
  for (int64_t i = s.begin; i < s.end; ++i)
    if (targets[i] != corpus::kNoTarget) {
      a.logp -= double(token_loss[i]);
      ++a.tokens;
    }
  return a;
}

}  // namespace

std::vector<PairSpans> find_pairs(const int32_t* targets, const int32_t* doc_start, int64_t B, int64_t T) {
  std::vector<PairSpans> pairs;
  std::vector<AnswerSpan> spans;
  for (int64_t b = 0; b < B; ++b) {
    spans.clear();
    answer_spans(targets, doc_start, b, T, spans);
    if (spans.size() % 2 != 0)
      fail("preference data: a window holds {} answers, not whole chosen/rejected pairs (was it prepared with "
           "data.format = \"preference\"?)",
           spans.size());
    for (size_t k = 0; k < spans.size(); k += 2) pairs.push_back({spans[k], spans[k + 1]});
  }
  return pairs;
}

PairCounts count_pairs(const int32_t* targets, const int32_t* doc_start, int64_t B, int64_t T) {
  PairCounts c;
  for (const PairSpans& p : find_pairs(targets, doc_start, B, T)) {
    ++c.pairs;
    for (int64_t i = p.chosen.begin; i < p.chosen.end; ++i) c.chosen_tokens += targets[i] != corpus::kNoTarget;
  }
  return c;
}

void score_pairs(Objective o, const PreferenceParams& p, const std::vector<PairSpans>& pairs, const int32_t* targets,
                 const float* token_loss, const float* ref_token_loss, int64_t step_pairs, int64_t step_chosen_tokens,
                 PreferenceTotals& totals, float* d_token_loss) {
  if (needs_reference(o) && !ref_token_loss) fail("score_pairs: objective {} needs the reference", objective_name(o));
  const bool nll = adds_chosen_nll(o);
  for (const PairSpans& s : pairs) {
    const AnswerScore c = score(s.chosen, token_loss, targets), r = score(s.rejected, token_loss, targets);
    PairLogps x{c.logp, r.logp, c.tokens, r.tokens, 0, 0};
    if (ref_token_loss) {
      x.ref_chosen = score(s.chosen, ref_token_loss, targets).logp;
      x.ref_rejected = score(s.rejected, ref_token_loss, targets).logp;
    }
    const PairLoss l = pair_loss(o, p, x);
    ++totals.pairs;
    totals.chosen_tokens += c.tokens;
    totals.loss += l.loss;
    totals.chosen_nll -= c.logp;
    totals.reward_chosen += l.reward_chosen;
    totals.reward_rejected += l.reward_rejected;
    totals.reward_accuracy += l.reward_chosen > l.reward_rejected ? 1 : 0;
    totals.reward_margin += l.reward_chosen - l.reward_rejected;
    totals.logps_chosen += c.logp;
    totals.logps_rejected += r.logp;
    if (!d_token_loss) continue;
    // logp = -(sum of token losses): d/d(token loss) = -d/d(logp), over the
    // step's pairs; ORPO's SFT term is the mean over the step's chosen tokens.
    const float dc = float(-l.d_chosen / double(step_pairs) + (nll ? 1.0 / double(step_chosen_tokens) : 0.0));
    const float dr = float(-l.d_rejected / double(step_pairs));
    for (int64_t i = s.chosen.begin; i < s.chosen.end; ++i)
      d_token_loss[i] = targets[i] != corpus::kNoTarget ? dc : 0.f;
    for (int64_t i = s.rejected.begin; i < s.rejected.end; ++i)
      d_token_loss[i] = targets[i] != corpus::kNoTarget ? dr : 0.f;
  }
}

}  // namespace ggtrain::train
