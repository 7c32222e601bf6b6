#pragma once
// Human and machine readable listings of a GGUF file (`ggtrain inspect`).
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/reader.h"

namespace ggtrain::gguf {

nlohmann::json value_to_json(const Value& v);
// {"metadata": {key: value, ... arrays in full}, "tensors": [{name,type,shape,offset}]}
nlohmann::json inspect_json(const GgufFile& f);
// Metadata (long arrays summarised), tensor table, totals.
std::string inspect_text(const GgufFile& f);

}  // namespace ggtrain::gguf
