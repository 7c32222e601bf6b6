#pragma once
// The run folder before a run starts or continues in it: housekeeping
// (temporary files left by interrupted writes) and the checks that a resume
// continues the same model on the same vocabulary; the texts the trainer
// prints about it.
#include <string>

#include "tokenizer/tokenizer.h"
#include "train/run_config.h"

namespace ggtrain::train {

// Creates RUN/data (and RUN); fails naming the folder when it cannot, or
// when RUN is not a directory.
void create_run_folder(const std::string& run_dir);

// Removes the temporary files of writes that never completed (a SIGKILL or
// power loss during an atomic write leaves NAME.tmp.XXXXXX or .latest.tmp):
// they are never read, but would pile up.
void remove_stale_temp_files(const std::string& run_dir, bool quiet);

// On resume every model.* value must equal the checkpoint's: --set may
// change how training continues, never the model it continues.
void check_same_model(const RunConfig& now, const RunConfig& saved, const std::string& run_dir, int64_t step);

// The vocabulary a run resumes with must be the one its checkpoint
// `weights` was trained with, token for token.
void check_same_vocabulary(const tokenizer::Tokenizer& tok, const std::string& tok_source, const std::string& weights);

// A fresh random run id (16 hex digits).
std::string new_run_id();

// For messages: "the last checkpoint RUN/weights/step_N.gguf is intact" or
// "there is no checkpoint yet".
std::string last_checkpoint_text(const std::string& run_dir);

// The run folder as a shell word, for the "resume with" line.
std::string shell_word(const std::string& s);

}  // namespace ggtrain::train
