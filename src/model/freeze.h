#pragma once
// train.freeze patterns -> the parameter names they name.
#include <set>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/params.h"

namespace ggtrain::model {

// A pattern is a tensor name with or without ".weight" ("token_embd",
// "output", "blk.3.ffn_up.weight"), a block or block range with an optional
// tensor ("blk.0-3", "blk.5", "blk.0-3.attn_q"), or a block tensor alone
// ("attn_norm": in every block). Error naming `key` and the pattern when one
// matches no parameter of `layout`.
std::set<std::string> frozen_tensors(const ParamLayout& layout, const std::vector<std::string>& patterns,
                                     const std::string& key);

// What a run with config `c` does not update: under LoRA the whole base
// (only the adapters train), otherwise what the patterns name.
std::set<std::string> frozen_in_run(const Config& c, const std::vector<std::string>& patterns, const std::string& key);

}  // namespace ggtrain::model
