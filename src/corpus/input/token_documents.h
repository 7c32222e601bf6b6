#pragma once
// Pretokenized corpus files: llm.c's .bin shards and nanoGPT's train.bin /
// val.bin, read as documents of token ids (for training on them with the
// vocabulary they were made with, given as data.tokenizer).
//
// llm.c (dev/data/data_common.py, write_datafile): a header of 256 int32
// (little endian): [0] magic, [1] version, [2] number of tokens; then the
// tokens. Magic 20240520 with version 1 holds uint16 tokens ("gpt-2"),
// magic 20240801 with version 7 uint32 tokens ("llama-3").
// nanoGPT (data/*/prepare.py): raw little-endian uint16 tokens, no header.
//
// Both hold one flat stream in which an end-of-text token separates the
// documents (GPT-2's <|endoftext|>: llm.c puts it before each document,
// nanoGPT after). A document here is the tokens up to and including the
// next EOS id of the tokenizer; the final piece without one is a document
// too. Memory stays bounded: the file is read in chunks, and a run of more
// than kMaxDocumentTokens tokens without EOS is cut into documents of that
// many tokens.
#include <cstdint>
#include <memory>
#include <vector>

#include "corpus/input/documents.h"

namespace ggtrain::corpus {

constexpr int32_t kLlmcMagicGpt2 = 20240520;  // version 1, uint16 tokens
constexpr int32_t kLlmcMagicLlama3 = 20240801;  // version 7, uint32 tokens
constexpr uint64_t kLlmcHeaderBytes = 256 * 4;
constexpr size_t kMaxDocumentTokens = size_t(1) << 22;

bool is_pretokenized(FileType t);

// The type of a .bin file by its content: llm.c when its first int32 is an
// llm.c magic, else nanoGPT.
FileType detect_bin_type(const std::string& path);

// Where the tokens of a pretokenized file lie.
struct TokenFileLayout {
  uint64_t offset = 0;  // bytes before the first token (the llm.c header)
  int width = 2;  // bytes per token
  uint64_t count = 0;  // tokens
};

// Reads and checks the llm.c header (magic, version, token count against
// the file size, exactly) or the nanoGPT size (even); fails naming the file.
// Compressed token files are refused.
TokenFileLayout token_file_layout(const InputFile& file);

// The documents of one pretokenized file, in order, as they are in the file
// (nothing added). Every id is checked to be below `vocab_size`:
// `PATH: token I is id N, past the vocabulary of data.tokenizer (V tokens)`.
class TokenDocumentReader {
 public:
  TokenDocumentReader(const InputFile& file, int64_t vocab_size, int32_t eos_id);
  ~TokenDocumentReader();
  TokenDocumentReader(const TokenDocumentReader&) = delete;
  TokenDocumentReader& operator=(const TokenDocumentReader&) = delete;
  // The next document into *doc; false at the end of the file.
  bool next(std::vector<int32_t>* doc);
  int64_t documents_read() const { return documents_; }
  uint64_t compressed_bytes_read() const;  // bytes of the file consumed (header included)

 private:
  bool refill();
  int32_t token_at(size_t i) const;

  InputFile file_;
  TokenFileLayout layout_;
  int64_t vocab_;
  int32_t eos_;
  std::unique_ptr<ByteStream> stream_;
  std::vector<unsigned char> buf_;  // a chunk of whole tokens
  size_t pos_ = 0, end_ = 0;  // tokens of buf_ consumed, held
  uint64_t consumed_ = 0;  // tokens of the file consumed
  uint64_t buffered_ = 0;  // tokens of the file read into buffers so far
  int64_t documents_ = 0;
};

}  // namespace ggtrain::corpus
