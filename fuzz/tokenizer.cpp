// Fuzz target: the tokenizer built from a GGUF's vocabulary (tokenizer.ggml.*,
// "llama" SPM or "gpt2" byte-level BPE with merges and a pre-tokenizer), then
// encode/decode of fixed texts and of the input's last bytes as text, and
// decode of ids taken from the input. Rejections must be ggtrain::Error;
// anything else is a finding.
#include <algorithm>
#include <string_view>

#include "fuzz_util.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace ggtrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ggtrain_fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    gguf::GgufFile f(path);
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(f);
    const int64_t n = tok.vocab_size();
    if (n <= 0) ggtrain_fuzz::finding("a tokenizer with no tokens was accepted");
    const size_t tail = std::min<size_t>(size, 96);
    const std::string_view from_input(reinterpret_cast<const char*>(data + size - tail), tail);
    const std::string_view texts[] = {
        "", " ", "Hello world", "  two  spaces ", "In the beginning God created the heaven.",
        "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\xa6\x99 \xe6\x97\xa5\xe6\x9c\xac",  // é, U+2581, emoji, CJK
        "\xff\xfe\x80 broken \xc3", "<s></s><unk>", "12345 67.89\n\ttab",
        // byte-level BPE corners: contractions, digit runs, whitespace kinds,
        // special-token look-alikes, overlong/surrogate/out-of-range UTF-8
        "it's IT'S we're 1234567890123 x=1;y+=2 `a` $5", " \xc2\xa0\xe3\x80\x80\t\v\f\r\n  \n\n ",
        "<|endoftext|><|user|>[[USER]] @@ <|channel|>", "\xc0\x80\xc1\x81\xed\xa0\x80\xf5\x80\x80\x80\xf0\xae\xaf\xb0",
        from_input};
    for (std::string_view text : texts) {
      for (bool bos : {false, true}) {
        const auto ids = tok.encode(text, bos);
        for (int32_t id : ids)
          if (id < 0 || id >= n) ggtrain_fuzz::finding("encode produced an id outside the vocabulary");
        ggtrain_fuzz::sink(tok.decode(ids).size());
      }
    }
    // Decoding ids straight from the input (in range).
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 2 <= size && ids.size() < 64; i += 2)
      ids.push_back(int32_t((data[i] | (data[i + 1] << 8)) % n));
    ggtrain_fuzz::sink(tok.decode(ids).size());
    for (int64_t id = 0; id < std::min<int64_t>(n, 300); ++id)
      ggtrain_fuzz::sink(tok.token_to_piece(int32_t(id)).size());
    try {
      tok.token_to_piece(int32_t(n));  // out of range: must be an Error
      ggtrain_fuzz::finding("token_to_piece accepted an id past the vocabulary");
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  return 0;
}
