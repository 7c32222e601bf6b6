#pragma once
// The model's GGUF metadata, "<arch>.*": one table names every key ggtrain
// writes or reads, in the order llama.cpp's converter writes them, with how
// each is written from a Config and read back into one (as llama.cpp's
// llama-arch.cpp names each key once for its loader and its converter).
// The checkpoint writer (model/checkpoint.cpp) and config_from_gguf
// (model/config.cpp) both walk it, so a key cannot be written under one
// name and read under another.
#include <optional>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/value.h"
#include "gguf/writer.h"
#include "model/config.h"

namespace ggtrain::model {

struct MetadataKey {
  // Keys a reader needs the validated shape for (the head size) are read in
  // a second pass, after the shape is checked.
  enum class Pass { kShape, kAfterShape };

  const char* name;  // after "<arch>."
  // Whether the family's files carry it (nullptr: every family's).
  bool (*in_family)(const Config& c);
  // Its value for `c`, or nothing when `c` does not write it (the
  // converter leaves it out). nullptr: read only (keys ggtrain refuses or
  // takes from older files).
  std::optional<gguf::Value> (*write)(const Config& c);
  // Into `c` from `f` (`key` with the "<arch>." prefix); nullptr: read with
  // the row before it.
  void (*read)(const gguf::GgufFile& f, const std::string& key, Config& c);
  Pass pass = Pass::kShape;
};

const std::vector<MetadataKey>& metadata_keys();

// Every row `c` writes, in the table's order.
void add_metadata_keys(gguf::GgufWriter& w, const Config& c);
// Every row of c.arch's family in `pass`, in the table's order (c.arch set).
void read_metadata_keys(const gguf::GgufFile& f, Config& c, MetadataKey::Pass pass);

}  // namespace ggtrain::model
