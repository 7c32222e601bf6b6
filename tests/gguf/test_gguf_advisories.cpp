// One crafted file per class of GGUF that 2026's advisories against
// llama.cpp's and ollama's readers describe (fuzz/regressions/, written by
// fuzz/make_advisory_regressions.py): ggtrain's reader, or its tokenizer for
// the tokenizer arrays, refuses each with an Error naming the file and what
// is wrong. fuzz/run.sh replays the same files under ASan + UBSan with a
// 1 GiB allocation limit. docs/reliability.md lists the caps beside the
// advisories.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace ggtrain;

namespace {

struct Advisory {
  const char* file;  // under fuzz/regressions/
  bool tokenizer;  // refused by Tokenizer::from_gguf, not by the reader
  std::vector<std::string> words;  // each must appear in the message
};

const std::vector<Advisory>& advisories() {
  static const std::vector<Advisory> rows{
      {"gguf_reader/refuse-alignment-2gib.gguf", false, {"general.alignment", "1 MiB"}},  // GHSA-96jg-mvhq-q7q7
      {"gguf_reader/refuse-kv-count-wraps.gguf", false, {"metadata count", "cannot fit"}},  // CVE-2026-27940
      {"gguf_reader/refuse-tensor-count-wraps.gguf", false, {"tensor count", "cannot fit"}},
      {"gguf_reader/refuse-string-length-gib.gguf", false, {"general.name", "64 MiB"}},  // ggml PR #1516
      {"gguf_reader/refuse-array-length-gib.gguf", false, {"tokenizer.ggml.scores", "array length"}},
      {"gguf_reader/refuse-tensor-dims-lie.gguf", false, {"token_embd.weight", "outside"}},  // CVE-2026-7482
      {"gguf_reader/refuse-tensor-dims-overflow.gguf", false, {"'t'", "overflows"}},
      {"tokenizer/refuse-tokens-not-strings.gguf", true, {"tokenizer.ggml.tokens", "string"}},  // llama.cpp #26690
      {"tokenizer/refuse-scores-not-floats.gguf", true, {"tokenizer.ggml.scores", "f32"}},
  };
  return rows;
}

std::string refusal(const Advisory& a, const std::string& path) {
  try {
    gguf::GgufFile f(path);
    if (!a.tokenizer) return "";
    (void)tokenizer::Tokenizer::from_gguf(f);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GgufAdvisories, EachCraftedFileIsRefusedNamingWhatIsWrong) {
  for (const Advisory& a : advisories()) {
    SCOPED_TRACE(a.file);
    const std::string path = std::string(GGTRAIN_SOURCE_DIR) + "/fuzz/regressions/" + a.file;
    const std::string msg = refusal(a, path);
    ASSERT_FALSE(msg.empty()) << "accepted";
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const auto& w : a.words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' missing: " << msg;
  }
}
