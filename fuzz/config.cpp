// Fuzz target: the run config loader. Any TOML document either is rejected
// with a ggtrain::Error or is applied; an applied config must survive
// to_toml -> apply_toml -> to_toml unchanged (the saved config of every
// checkpoint relies on it), and validate() must answer with an Error or not
// at all. Lines "key=value" of the input also go through apply_override
// (--set).
#include <string>

#include "fuzz_util.h"
#include "train/run_config.h"
#include "util/error.h"

using namespace ggtrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  train::RunConfig c = train::preset("tiny");
  try {
    train::apply_toml(c, text, "fuzz.toml");
  } catch (const Error&) {
    c = train::preset("tiny");
  }
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    try {
      train::apply_override(c, text.substr(pos, end - pos));
    } catch (const Error&) {
    }
    pos = end + 1;
  }
  const std::string once = train::to_toml(c);
  train::RunConfig back = train::preset("s15");  // every key must come from `once`
  try {
    train::apply_toml(back, once, "round trip");
  } catch (const Error& e) {
    ggtrain_fuzz::finding(std::string("to_toml output is rejected: ") + e.what() + "\n" + once);
  }
  if (train::to_toml(back) != once)
    ggtrain_fuzz::finding("to_toml round trip changed the config:\n" + once + "---\n" + train::to_toml(back));
  try {
    c.validate();
    back.validate();
  } catch (const Error&) {
  }
  return 0;
}
