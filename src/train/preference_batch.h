#pragma once
// A preference micro-batch: its pairs, found from the targets and document
// starts the loader gives (a preference window holds whole pairs, each as
// its chosen answer's document followed by its rejected one's:
// chat/chat_data.h), and the objective over them as per-position weights
// for the model's backward.
#include <cstdint>
#include <vector>

#include "train/preference_loss.h"

namespace ggtrain::train {

// Positions [begin, end) of a micro-batch laid out [B, T] whose targets are
// one answer's tokens.
struct AnswerSpan {
  int64_t begin = 0, end = 0;
};
struct PairSpans {
  AnswerSpan chosen, rejected;
};

// The micro-batch's pairs: in each row, the documents that hold counted
// targets, taken two by two. Error when a row holds an odd number of them
// (its window was not packed from preference pairs).
std::vector<PairSpans> find_pairs(const int32_t* targets, const int32_t* doc_start, int64_t B, int64_t T);

// Pairs and chosen-answer tokens of a micro-batch without finding the spans
// (every rank counts the whole step's, to weigh its own share).
struct PairCounts {
  int64_t pairs = 0, chosen_tokens = 0;
};
PairCounts count_pairs(const int32_t* targets, const int32_t* doc_start, int64_t B, int64_t T);

// Sums over pairs of what TRL logs (divide by `pairs` for its means).
struct PreferenceTotals {
  int64_t pairs = 0, chosen_tokens = 0;
  double loss = 0;  // sum of the pairs' losses
  double chosen_nll = 0;  // sum over chosen tokens of -log p (ORPO's SFT term)
  double reward_chosen = 0, reward_rejected = 0, reward_accuracy = 0, reward_margin = 0;
  double logps_chosen = 0, logps_rejected = 0;
};

// The objective over one micro-batch's pairs: `token_loss` and
// `ref_token_loss` are -log p of each position's target (the model's and
// the reference's, [B, T]; ref null for objectives without a reference),
// `targets` the micro-batch's (corpus::kNoTarget positions do not count).
// Adds this micro-batch's sums to `totals` and, when `d_token_loss` is not
// null, sets it to d(step objective)/d(token_loss) for every position,
// where the step objective is the mean pair loss over `step_pairs` pairs
// (plus, for ORPO, the mean -log p over `step_chosen_tokens` chosen tokens).
void score_pairs(Objective o, const PreferenceParams& p, const std::vector<PairSpans>& pairs, const int32_t* targets,
                 const float* token_loss, const float* ref_token_loss, int64_t step_pairs, int64_t step_chosen_tokens,
                 PreferenceTotals& totals, float* d_token_loss);

}  // namespace ggtrain::train
