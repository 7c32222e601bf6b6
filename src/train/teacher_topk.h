#pragma once
// A distillation teacher paid for once (train.objective = "distill"):
// before the first step the teacher scores every window of the prepared
// data, and each target position's k most likely tokens and their
// log-probabilities at the run's temperature, with the log of the rest of
// the mass, are kept beside the token files. Training streams them from
// the memory map: the teacher never sits in training memory. The file
// records what it was computed from (the teacher's tensors, the token
// stream, the window length, k, the temperature, the shared vocabulary),
// and a resumed run refuses one that no longer matches.
//
// Layout: a header, then one record per token of the stream (position p is
// the target at stream index p; position 0 and untrained targets hold
// zeros): int32 ids[k], float logp[k], float log_other.
#include <cstdint>
#include <memory>
#include <string>

#include "train/distill_loss.h"
#include "util/atomic_file.h"
#include "util/mapped_file.h"

namespace ggtrain::train {

struct TeacherSource {
  uint64_t teacher = 0;  // model::base_fingerprint of train.teacher
  uint64_t tokens = 0;  // token_stream_fingerprint
  int64_t seq_len = 0, k = 0;
  int64_t vocab = 0;  // ids the teacher's top k are drawn from (the vocabulary both share)
  double temperature = 1;
  bool operator==(const TeacherSource&) const = default;
};

// The k most likely of the first `shared` ids of a teacher's logits
// [V] at temperature tau, most likely first, their log-probabilities
// over all V, and log of the mass outside them (-inf when none is left).
// The sums run in double.
void teacher_top_k(const float* logits, int64_t V, int64_t shared, int64_t k, double tau, int32_t* ids, float* logp,
                   float* log_other);

// Writes the records in stream order; commit() makes the file appear whole.
// A part (`part`): n_tokens records and no header, one rank's share of the
// windows, which append_part() copies into the whole file.
class TeacherTopKWriter {
 public:
  TeacherTopKWriter(const std::string& path, const TeacherSource& source, int64_t n_tokens, bool part = false);
  // The record of the next position.
  void add(const int32_t* ids, const float* logp, float log_other);
  void add_empty(int64_t n = 1);
  // The n records of the part file at `part_path`, next.
  void append_part(const std::string& part_path, int64_t n);
  void commit();  // Error unless every position got its record
  int64_t record_bytes() const;

 private:
  AtomicFileWriter out_;
  TeacherSource source_;
  int64_t n_tokens_, written_ = 0;
};

class TeacherTopK {
 public:
  // Error naming the file and what differs unless it was computed from
  // `source` for `n_tokens` tokens.
  TeacherTopK(const std::string& path, const TeacherSource& source, int64_t n_tokens);
  TeacherRow row(int64_t position) const;
  int64_t k() const { return k_; }

 private:
  std::unique_ptr<MappedFile> map_;
  int64_t k_ = 0, n_tokens_ = 0;
};

}  // namespace ggtrain::train
