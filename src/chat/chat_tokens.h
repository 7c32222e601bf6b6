#pragma once
// Rendered chat text as token ids, with the ids the loss is on.
#include <cstdint>
#include <string>
#include <vector>

#include "chat/template.h"
#include "tokenizer/tokenizer.h"

namespace ggtrain::chat {

struct EncodedExample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;  // per id: 1 when predicting it carries loss
};

// BOS (when the vocabulary adds one) and the spans' tokens. Each span is
// tokenized as llama.cpp tokenizes text with parse_special: markers become
// their control tokens and text after a marker gets the space prefix; a
// span that continues text (an answer after "assistant\n") is tokenized on
// its own, without a space prefix, so the prompt's ids are exactly those
// llama.cpp gives the same prompt at inference.
EncodedExample encode_spans(const tokenizer::Tokenizer& tok, const std::vector<Span>& spans);

// The template's markers that are not tokens of `tok`, in the template's
// order. Error naming the marker when one is a token but not a special one
// (parse_special would not cut it out).
std::vector<std::string> missing_markers(const tokenizer::Tokenizer& tok, Template t);

// The id of the template's end-of-turn marker (tokenizer.ggml.eot_token_id).
int32_t end_of_turn_id(const tokenizer::Tokenizer& tok, Template t);

}  // namespace ggtrain::chat
