#pragma once
// A finetune whose vocabulary grows (chat markers a base lacks, appended as
// control tokens): the base's parameters carried into the larger model.
#include <cstdint>

#include "model/params.h"

namespace ggtrain::model {

// Every tensor of `from` copied into the same-named one of `to`; the
// vocabulary-sized ones (token_embd, output: [vocab, C]) keep their first
// `old_vocab` rows and each new row starts as the mean of those rows, so a
// new token begins as an average token: no logit of the existing ones moves
// until it trains. Error when a tensor other than those two differs in shape.
void grow_vocabulary(const ParamLayout& from, const float* src, int64_t old_vocab, const ParamLayout& to, float* dst);

}  // namespace ggtrain::model
