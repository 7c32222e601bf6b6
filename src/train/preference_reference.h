#pragma once
// The reference model of DPO and IPO, paid for once: before the first step
// the run's initial weights (init.from; with LoRA the base, as the adapter
// starts at zero) score every token of the prepared preference data, and
// the result is kept beside the token files, so no second model is held in
// memory and no step runs a second forward. The file records what it was
// computed from (the init.from tensors' fingerprint, the token stream's and
// the window length), and a resumed run refuses one that no longer matches.
#include <cstdint>
#include <string>
#include <vector>

#include "corpus/token_file.h"

namespace ggtrain::train {

struct ReferenceSource {
  uint64_t model = 0;  // model::base_fingerprint of init.from
  uint64_t tokens = 0;  // token_stream_fingerprint
  int64_t seq_len = 0;
  bool operator==(const ReferenceSource&) const = default;
};

// FNV-1a of every token id of the stream.
uint64_t token_stream_fingerprint(const corpus::TokenStream& s);

// losses[k]: the reference's -log p of stream token k as a target in its
// window (0 where it is no counted target). Written atomically.
void write_reference(const std::string& path, const ReferenceSource& source, const std::vector<float>& losses);

// The losses of `path`, which must have been computed from `source` for
// `n_tokens` tokens; Error naming the file and what differs otherwise.
std::vector<float> read_reference(const std::string& path, const ReferenceSource& source, int64_t n_tokens);

}  // namespace ggtrain::train
