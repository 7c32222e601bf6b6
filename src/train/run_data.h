#pragma once
// A run's data: the tokenizer trained on its corpus when it brings none,
// and the training and validation token streams prepared into RUN/data
// (corpus/prepare/prepare.h) from the data.* keys.
#include <memory>
#include <string>
#include <vector>

#include "corpus/batch_loader.h"
#include "corpus/prepare/prepare.h"
#include "corpus/token_file.h"
#include "tokenizer/tokenizer.h"
#include "train/run_config.h"

namespace ggtrain::train {

corpus::PrepareOptions prepare_options(const RunConfig& c, bool quiet);

// Trains a sentencepiece BPE tokenizer of data.vocab_size pieces on a
// seeded sample of at most data.tokenizer_sample_lines lines of the corpus
// and writes it to out_model.
void train_tokenizer_on_corpus(const RunConfig& c, const std::string& out_model, bool quiet);

// The run's tokenizer: init.donor's or init.from's vocabulary, else
// data.tokenizer, else RUN/tokenizer.model (trained on the corpus when
// missing; on resume without it, the vocabulary of the latest checkpoint).
tokenizer::Tokenizer run_tokenizer(const std::string& run_dir, const RunConfig& c, bool quiet, int64_t resume_step);

// Prepares (or reuses) every corpus of the run into DIR: data.corpus into
// DIR itself, source k of data.sources into DIR/source-k. On resume a
// mismatch with the manifest is refused.
std::vector<corpus::PreparedData> prepare_run_data(const RunConfig& c, const std::string& dir,
                                                   const tokenizer::Tokenizer& tok, bool resume, bool quiet);

// An instruction-tuning run (data.format other than "text"): the template
// (data.chat_template resolved against the vocabulary's own), its markers
// added to the vocabulary as control tokens when missing (a full finetune
// grows token_embd/output by those rows), and tokenizer.chat_template and
// the end-of-turn id set so every checkpoint carries them. Returns how many
// tokens were added. Error for a LoRA run that would need new tokens (their
// rows could not train).
int64_t add_chat_vocabulary(tokenizer::Tokenizer& tok, const RunConfig& c, bool quiet);

struct RunTokens {
  std::vector<std::unique_ptr<corpus::TokenStream>> train;  // one per source (data.corpus: one)
  std::vector<double> weights;  // data.sources' weights
  std::unique_ptr<corpus::TokenStream> val;  // null when there is no validation text
  // Instruction data: per-token flags of train[0] and val (corpus/batch_loader.h).
  std::unique_ptr<corpus::TokenStream> train_flags, val_flags;
  int32_t document_token = -1;  // data.attention = "document" on text: BOS starts a document
  corpus::WindowLabels train_labels() const { return {train_flags.get(), document_token}; }
  int64_t train_tokens() const {
    int64_t n = 0;
    for (const auto& s : train) n += s->size();
    return n;
  }
  corpus::WindowLabels val_labels() const { return {val_flags.get(), document_token}; }
};

// Prepares (or reuses) RUN/data and opens its shards. On resume the data
// must be what the run was prepared with (sources, options, tokenizer), or
// this refuses naming what changed; a folder prepared before shards and
// manifests (data/train.tok, or data/chat.json with chat-train.tok) is used
// as it is. Under
// mpirun run_training builds rank 0's run (this included) before any other
// rank starts: the others find the folder complete (or, on another machine
// without it, prepare the same files). No collective here: one would pair
// with run_training's barrier and let the other ranks start early.
RunTokens open_run_tokens(const RunConfig& c, const std::string& run_dir, const tokenizer::Tokenizer& tok, bool resume,
                          bool quiet);

}  // namespace ggtrain::train
