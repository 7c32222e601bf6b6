#pragma once
// `ggtrain import`: checkpoints of older trainers of this family
// ("toy-from-scratch/v1") to a standard llama GGUF.
//
// Those files store attention per head, blk.N.attn_{q,k,v}.head_H.weight,
// each F32 ne [d_model, d_head] (row-major [d_head, d_model]); everything
// else already has llama.cpp names. Import fuses the heads head-major into
// blk.N.attn_{q,k,v}.weight, head h at element offset h*d_head*d_model (the
// bytes of the heads concatenated: no transpose, no reorder), with
// llama.attention.head_count heads for Q and head_count_kv for K and V.
// Every other tensor is copied verbatim (same type, same bytes). A file with
// a projection lens (`lens.proj.weight`, F32 ne [donor_dim, d_model], over a
// donor token_embd ne [donor_dim, vocab]) gets the lens folded into an F32
// token_embd (model/lens.h) and no lens tensor.
//
// Metadata: every key is kept except toy.* (they describe the per-head
// layout, which the output no longer has), ggtrain.* (they tie a weights
// file to a run's state file, which an imported model does not have) and
// general.alignment (the writer sets its own).
//
// An already-fused llama file is accepted: it gets the same validation and
// is copied (lens folded, keys dropped as above). Every problem is an Error
// naming the file and the tensor or key; nothing is written then.
#include <cstdint>
#include <string>
#include <vector>

namespace ggtrain::convert {

struct ImportReport {
  int64_t fused_tensors = 0;  // attn_q/k/v tensors assembled from heads
  int64_t heads_read = 0;  // per-head tensors consumed
  int64_t copied_tensors = 0;
  bool lens_folded = false;
  int64_t donor_dim = 0;  // of the folded lens
  std::vector<std::string> dropped_keys;
};

ImportReport import_checkpoint(const std::string& in_path, const std::string& out_path);

}  // namespace ggtrain::convert
