// util/sha256 against independent truth: FIPS 180-4's example digests, and
// coreutils' sha256sum on buffers of every length around the 64-byte block
// and its 56-byte padding boundary, fed whole and in uneven pieces.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "util/sha256.h"

using namespace ggtrain;

namespace {

std::string digest(const std::string& s) {
  Sha256 h;
  h.update(s.data(), s.size());
  return h.hex();
}

// sha256sum's digest of the file at path.
std::string sha256sum(const std::string& path) {
  FILE* p = ::popen(("sha256sum '" + path + "'").c_str(), "r");
  if (!p) return "";
  char buf[65] = {};
  const size_t n = std::fread(buf, 1, 64, p);
  ::pclose(p);
  return std::string(buf, n);
}

}  // namespace

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, EqualsSha256sumAtEveryLengthAroundTheBlocks) {
  test_support::TempDir tmp;
  std::string data;
  for (size_t n = 0; n <= 200; ++n) {
    SCOPED_TRACE(n);
    const std::string path = tmp / "d.bin";
    std::ofstream(path, std::ios::binary) << data;
    const std::string want = sha256sum(path);
    ASSERT_EQ(want.size(), 64u) << "sha256sum gave no digest";
    EXPECT_EQ(digest(data), want);
    EXPECT_EQ(sha256_of_file(path), want);
    Sha256 pieces;  // the same bytes in pieces of 1, 2, 3, ... bytes
    for (size_t at = 0, k = 1; at < data.size(); at += k, ++k)
      pieces.update(data.data() + at, std::min(k, data.size() - at));
    EXPECT_EQ(pieces.hex(), want);
    data += char((n * 131 + 7) & 0xff);
  }
}
