// Corpus input (src/corpus/input/documents.h): which files a spec names, how
// .gz/.zst files decompress, how bytes split into documents, and the exact
// message of every bad input. All data is written by the tests themselves.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "corpus/input/documents.h"
#include "support/compress.h"
#include "support/files.h"
#include "support/temp_dir.h"
#include "util/error.h"
#include "util/utf8.h"

using ggtrain::test_support::error_of;
namespace {

using ggtrain::Error;
using ggtrain::first_invalid_utf8;
using ggtrain::corpus::ByteStream;
using ggtrain::corpus::Compression;
using ggtrain::corpus::DocSeparator;
using ggtrain::corpus::DocumentOptions;
using ggtrain::corpus::DocumentReader;
using ggtrain::corpus::expand_inputs;
using ggtrain::corpus::FileType;
using ggtrain::corpus::InputFile;
using ggtrain::corpus::OnBadDocument;
using ggtrain::test_support::TempDir;
namespace fs = std::filesystem;

const std::string kKey = "data.corpus";

void write_file(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string gzip(const std::string& data) { return ggtrain::test_support::gzip_of(data); }
std::string zstd(const std::string& data) { return ggtrain::test_support::zstd_of(data); }

// Lines that do not compress to nothing, so a cut lands inside the data.
std::string varied_lines(int n) {
  std::string s;
  uint64_t x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s += "line " + std::to_string(i) + " value " + std::to_string(x >> 20) + "\n";
  }
  return s;
}

InputFile one_file(const std::string& path, std::optional<FileType> forced = std::nullopt) {
  auto files = expand_inputs({path}, forced, kKey);
  EXPECT_EQ(files.size(), 1u);
  return files.at(0);
}

std::vector<std::string> read_docs(const InputFile& f, const DocumentOptions& o = {}) {
  DocumentReader r(f, o);
  std::vector<std::string> docs;
  for (std::string d; r.next(&d);) docs.push_back(d);
  EXPECT_EQ(r.documents_read(), int64_t(docs.size()));
  return docs;
}

std::vector<std::string> read_docs(const std::string& path, const DocumentOptions& o = {}) {
  return read_docs(one_file(path), o);
}

DocumentOptions separated_by(DocSeparator s) {
  DocumentOptions o;
  o.separator = s;
  return o;
}

DocumentOptions skipping() {
  DocumentOptions o;
  o.on_bad = OnBadDocument::kSkip;
  return o;
}

std::vector<std::string> paths_of(const std::vector<InputFile>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(f.path);
  return out;
}

using Docs = std::vector<std::string>;
using Paths = std::vector<std::string>;

// ---------------------------------------------------------------- UTF-8

int64_t bad_at(const std::string& s) { return first_invalid_utf8(s.data(), s.size()); }

TEST(DocumentsUtf8, AcceptsWellFormedText) {
  EXPECT_EQ(bad_at(""), -1);
  EXPECT_EQ(bad_at("plain ASCII"), -1);
  EXPECT_EQ(bad_at("\xC2\x80 \xDF\xBF"), -1);  // U+0080, U+07FF
  EXPECT_EQ(bad_at("\xE0\xA0\x80 \xED\x9F\xBF \xEE\x80\x80"), -1);  // U+0800, U+D7FF, U+E000
  EXPECT_EQ(bad_at("\xF0\x90\x80\x80 \xF4\x8F\xBF\xBF"), -1);  // U+10000, U+10FFFF
  EXPECT_EQ(bad_at("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), -1);
}

TEST(DocumentsUtf8, RejectsOverlongForms) {
  EXPECT_EQ(bad_at("a\xC0\x80"), 1);
  EXPECT_EQ(bad_at("ab\xC1\xBF"), 2);
  EXPECT_EQ(bad_at("\xE0\x80\x80"), 0);
  EXPECT_EQ(bad_at("\xE0\x9F\xBF"), 0);
  EXPECT_EQ(bad_at("xyz\xF0\x80\x80\x80"), 3);
  EXPECT_EQ(bad_at("\xF0\x8F\xBF\xBF"), 0);
}

TEST(DocumentsUtf8, RejectsSurrogates) {
  EXPECT_EQ(bad_at("\xED\xA0\x80"), 0);  // U+D800
  EXPECT_EQ(bad_at("ok \xED\xBF\xBF"), 3);  // U+DFFF
  EXPECT_EQ(bad_at("\xED\xA0\xBD\xED\xB8\x80"), 0);  // a CESU-8 pair
}

TEST(DocumentsUtf8, RejectsCodePointsPastU10FFFF) {
  EXPECT_EQ(bad_at("\xF4\x90\x80\x80"), 0);  // U+110000
  EXPECT_EQ(bad_at("a\xF5\x80\x80\x80"), 1);
  EXPECT_EQ(bad_at("\xF8\x88\x80\x80\x80"), 0);
  EXPECT_EQ(bad_at("\xFF"), 0);
}

TEST(DocumentsUtf8, RejectsTruncatedAndStraySequences) {
  EXPECT_EQ(bad_at("ab\xE2\x82"), 2);  // cut at the end
  EXPECT_EQ(bad_at("\xF0\x9F\x98 x"), 0);  // cut before ASCII
  EXPECT_EQ(bad_at("a\x80"), 1);  // a lone continuation byte
  EXPECT_EQ(bad_at("\xC3\xA9\xC3"), 2);
  EXPECT_EQ(bad_at("\xE2\x28\xA1"), 0);  // second byte not a continuation
}

TEST(DocumentsUtf8, FindsTheOffsetFarIntoALongString) {
  std::string s(1000, 'a');
  s += "\xC3\xA9";
  s += std::string(500, 'b');
  s += "\xED\xA0\x80";
  s += std::string(100, 'c');
  EXPECT_EQ(bad_at(s), 1502);
}

// ---------------------------------------------------------------- text splitting

TEST(DocumentsText, EachNonEmptyLineWithCrlfAndNoFinalNewline) {
  TempDir t;
  write_file(t / "a.txt", "first\r\n\r\nsecond line\n\n  \nlast without newline");
  EXPECT_EQ(read_docs(t / "a.txt"), (Docs{"first", "second line", "  ", "last without newline"}));
}

TEST(DocumentsText, EmptyFileHasNoDocuments) {
  TempDir t;
  write_file(t / "empty.txt", "");
  for (auto s : {DocSeparator::kLine, DocSeparator::kBlankLine, DocSeparator::kFile})
    EXPECT_TRUE(read_docs(t / "empty.txt", separated_by(s)).empty());
}

TEST(DocumentsText, BlankLinesSeparateParagraphs) {
  TempDir t;
  write_file(t / "p.txt", "\n\np1 a\r\np1 b\n\n\n \t\np2 a\np2 b\np2 c\n\nlast");
  EXPECT_EQ(read_docs(t / "p.txt", separated_by(DocSeparator::kBlankLine)),
            (Docs{"p1 a\np1 b", "p2 a\np2 b\np2 c", "last"}));
}

TEST(DocumentsText, WholeFileIsOneDocumentAsIs) {
  TempDir t;
  std::string text = "line one\r\n\nline two\n";
  write_file(t / "w.txt", text);
  EXPECT_EQ(read_docs(t / "w.txt", separated_by(DocSeparator::kFile)), Docs{text});
}

TEST(DocumentsText, LineLongerThanTheReadBuffer) {
  TempDir t;
  std::string big(5 << 20, 'x');
  big[123] = 'y';
  write_file(t / "long.txt", "short\n" + big + "\r\nafter\n");
  DocumentReader r(one_file(t / "long.txt"), {});
  std::string d;
  ASSERT_TRUE(r.next(&d));
  EXPECT_EQ(d, "short");
  ASSERT_TRUE(r.next(&d));
  EXPECT_EQ(d, big);
  ASSERT_TRUE(r.next(&d));
  EXPECT_EQ(d, "after");
  EXPECT_FALSE(r.next(&d));
  EXPECT_EQ(r.bytes_read(), 6 + big.size() + 2 + 6);
  EXPECT_EQ(r.compressed_bytes_read(), r.bytes_read());
}

// ---------------------------------------------------------------- JSONL

TEST(DocumentsJsonl, TextMembersWithEscapesCrlfAndNoFinalNewline) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": \"two\\nlines\", \"id\": 1}\r\n"
                            "\n"
                            "{\"id\": 2, \"text\": \"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\t\"}\n"
                            "   \r\n"
                            "{\"text\": \"\"}\n"
                            "{\"meta\": {\"text\": 5}, \"text\": \"raw \xC3\xA9\"}");
  DocumentReader r(one_file(t / "r.jsonl"), {});
  Docs docs;
  for (std::string d; r.next(&d);) docs.push_back(d);
  EXPECT_EQ(docs, (Docs{"two\nlines", "caf\xC3\xA9 \xF0\x9F\x98\x80 \"q\" \t", "raw \xC3\xA9"}));
  EXPECT_EQ(r.skipped(), 0);  // the empty string is no document, not a bad one
}

TEST(DocumentsJsonl, OtherTextKey) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"content\": \"a\", \"text\": \"not this\"}\n");
  DocumentOptions o;
  o.text_key = "content";
  EXPECT_EQ(read_docs(t / "r.jsonl", o), Docs{"a"});
}

TEST(DocumentsJsonl, RecordLongerThanFourMiB) {
  TempDir t;
  std::string text;
  for (int i = 0; text.size() < (5u << 20); ++i) text += "word" + std::to_string(i) + " ";
  write_file(t / "big.jsonl", "{\"text\": \"a\"}\n{\"text\": \"" + text + "\"}\n{\"text\": \"z\"}\n");
  EXPECT_EQ(read_docs(t / "big.jsonl"), (Docs{"a", text, "z"}));
}

TEST(DocumentsJsonl, EmptyFileHasNoDocuments) {
  TempDir t;
  write_file(t / "e.jsonl", "");
  EXPECT_TRUE(read_docs(t / "e.jsonl").empty());
}

// ---------------------------------------------------------------- bad documents

TEST(DocumentsBad, JsonlLineNotJson) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": \"ok\"}\n{\"text\": oops}\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "r.jsonl"); }),
            t / "r.jsonl:2: not valid JSON (The JSON document has an improper structure: missing or superfluous "
                "commas, braces, missing keys, etc.)");
}

TEST(DocumentsBad, JsonlBrokenAfterTheTextMember) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": \"ok\", \"x\": tru}\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "r.jsonl"); }),
            t / "r.jsonl:1: not valid JSON (Problem while parsing an atom starting with the letter 't')");
}

TEST(DocumentsBad, JsonlLineNotAnObject) {
  TempDir t;
  write_file(t / "r.jsonl", "[\"text\", \"a\"]\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "r.jsonl"); }),
            t / "r.jsonl:1: not a JSON object but an array (each line must be an object with a string member "
                "\"text\")");
}

TEST(DocumentsBad, JsonlKeyMissing) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": \"a\"}\n\n{\"body\": \"b\"}\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "r.jsonl"); }),
            t / "r.jsonl:3: no string member \"text\" (set data.text_key)");
}

TEST(DocumentsBad, JsonlKeyNotAString) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": 42}\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "r.jsonl"); }),
            t / "r.jsonl:1: no string member \"text\" (set data.text_key): it is a number");
  write_file(t / "n.jsonl", "{\"text\": null}\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "n.jsonl"); }),
            t / "n.jsonl:1: no string member \"text\" (set data.text_key): it is null");
}

TEST(DocumentsBad, JsonlUnpairedSurrogateEscapeIsNotValidJson) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": \"\\udc00\"}\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "r.jsonl"); }),
            t / "r.jsonl:1: not valid JSON (Problem while parsing a string)");
}

TEST(DocumentsBad, JsonlSkipCountsEveryBadLine) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": \"one\"}\n"
                            "not json\n"
                            "[1]\n"
                            "{\"body\": \"x\"}\n"
                            "{\"text\": 1.5}\n"
                            "{\"text\": \"bad \xFF byte\"}\n"
                            "{\"text\": \"two\"}\n");
  DocumentReader r(one_file(t / "r.jsonl"), skipping());
  Docs docs;
  for (std::string d; r.next(&d);) docs.push_back(d);
  EXPECT_EQ(docs, (Docs{"one", "two"}));
  EXPECT_EQ(r.skipped(), 5);
  EXPECT_EQ(r.documents_read(), 2);
}

TEST(DocumentsBad, JsonlInvalidUtf8NamesByteAndLine) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\xC0\x80\"}\n");
  // Line 2 starts at byte 14; the bad byte is the 12th of it.
  EXPECT_EQ(error_of([&] { read_docs(t / "r.jsonl"); }), t / "r.jsonl: invalid UTF-8 at byte 25 (line 2)");
}

TEST(DocumentsBad, TextLineInvalidUtf8) {
  TempDir t;
  write_file(t / "u.txt", "good\r\nab\xFF"
                          "c\nmore\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "u.txt"); }), t / "u.txt: invalid UTF-8 at byte 8 (line 2)");
  DocumentReader r(one_file(t / "u.txt"), skipping());
  Docs docs;
  for (std::string d; r.next(&d);) docs.push_back(d);
  EXPECT_EQ(docs, (Docs{"good", "more"}));
  EXPECT_EQ(r.skipped(), 1);
}

TEST(DocumentsBad, ParagraphWithInvalidUtf8IsSkippedWhole) {
  TempDir t;
  write_file(t / "p.txt", "p1\n\np2 a\np2 \xED\xA0\x80\np2 c\n\np3\n");
  DocumentOptions o = separated_by(DocSeparator::kBlankLine);
  EXPECT_EQ(error_of([&] { read_docs(t / "p.txt", o); }), t / "p.txt: invalid UTF-8 at byte 12 (line 4)");
  o.on_bad = OnBadDocument::kSkip;
  DocumentReader r(one_file(t / "p.txt"), o);
  Docs docs;
  for (std::string d; r.next(&d);) docs.push_back(d);
  EXPECT_EQ(docs, (Docs{"p1", "p3"}));
  EXPECT_EQ(r.skipped(), 1);
  EXPECT_EQ(r.first_skipped(), t / "p.txt: invalid UTF-8 at byte 12 (line 4)");  // said, not dropped silently
}

TEST(DocumentsBad, WholeFileInvalidUtf8) {
  TempDir t;
  write_file(t / "w.txt", "one\ntwo\nthr\xF4\x90\x80\x80"
                          "ee\n");
  DocumentOptions o = separated_by(DocSeparator::kFile);
  EXPECT_EQ(error_of([&] { read_docs(t / "w.txt", o); }), t / "w.txt: invalid UTF-8 at byte 11 (line 3)");
  o.on_bad = OnBadDocument::kSkip;
  DocumentReader r(one_file(t / "w.txt"), o);
  std::string d;
  EXPECT_FALSE(r.next(&d));
  EXPECT_EQ(r.skipped(), 1);
}

TEST(DocumentsBad, InvalidUtf8OffsetIsInTheDecompressedFile) {
  TempDir t;
  write_file(t / "u.txt.gz", gzip("abc\n\xC3(\n"));
  EXPECT_EQ(error_of([&] { read_docs(t / "u.txt.gz"); }), t / "u.txt.gz: invalid UTF-8 at byte 4 (line 2)");
}

// ---------------------------------------------------------------- compression

TEST(DocumentsCompression, GzipAndZstdReadLikeThePlainFile) {
  TempDir t;
  std::string text = varied_lines(100000);  // several MiB: many input and output buffers
  write_file(t / "c.txt", text);
  write_file(t / "c.txt.gz", gzip(text));
  write_file(t / "c.txt.zst", zstd(text));
  Docs plain = read_docs(t / "c.txt");
  ASSERT_EQ(plain.size(), 100000u);
  EXPECT_EQ(read_docs(t / "c.txt.gz"), plain);
  EXPECT_EQ(read_docs(t / "c.txt.zst"), plain);
}

TEST(DocumentsCompression, ByteStreamCountsBothSides) {
  TempDir t;
  std::string text = varied_lines(20000);
  write_file(t / "c.txt.zst", zstd(text));
  ByteStream s(one_file(t / "c.txt.zst"));
  std::string out;
  char buf[4096];
  for (size_t n; (n = s.read(buf, sizeof buf)) > 0;) out.append(buf, n);
  EXPECT_EQ(out, text);
  EXPECT_EQ(s.bytes_out(), text.size());
  EXPECT_EQ(s.compressed_bytes_read(), fs::file_size(t / "c.txt.zst"));
}

TEST(DocumentsCompression, ConcatenatedGzipMembersReadWhole) {
  TempDir t;
  write_file(t / "two.txt.gz", gzip("from a\nmore a\n") + gzip("from b\n"));
  EXPECT_EQ(read_docs(t / "two.txt.gz"), (Docs{"from a", "more a", "from b"}));
}

TEST(DocumentsCompression, LargeGzipMembersMeetInsideAReadBuffer) {
  TempDir t;
  std::string a = varied_lines(120000), b = varied_lines(50000);
  std::string first = gzip(a);
  ASSERT_GT(first.size(), 1u << 20);  // the first member outlasts the first 1 MiB read
  write_file(t / "ab.txt.gz", first + gzip(b));
  ByteStream s(one_file(t / "ab.txt.gz"));
  std::string out;
  std::vector<char> buf(100000);
  for (size_t n; (n = s.read(buf.data(), buf.size())) > 0;) out.append(buf.data(), n);
  EXPECT_TRUE(out == a + b);
  EXPECT_EQ(s.compressed_bytes_read(), fs::file_size(t / "ab.txt.gz"));
}

TEST(DocumentsCompression, ConcatenatedZstdFramesReadWhole) {
  TempDir t;
  write_file(t / "two.txt.zst", zstd("from a\n") + zstd("from b\n"));
  EXPECT_EQ(read_docs(t / "two.txt.zst"), (Docs{"from a", "from b"}));
}

TEST(DocumentsCompression, CompressedJsonl) {
  TempDir t;
  std::string records = "{\"text\": \"x\"}\n{\"text\": \"y\"}\n";
  write_file(t / "r.jsonl.gz", gzip(records));
  write_file(t / "r.ndjson.zst", zstd(records));
  EXPECT_EQ(read_docs(t / "r.jsonl.gz"), (Docs{"x", "y"}));
  EXPECT_EQ(read_docs(t / "r.ndjson.zst"), (Docs{"x", "y"}));
}

TEST(DocumentsCompression, TruncatedGzipFails) {
  TempDir t;
  std::string gz = gzip(varied_lines(20000));
  write_file(t / "cut.txt.gz", gz.substr(0, gz.size() / 2));
  EXPECT_EQ(error_of([&] { read_docs(t / "cut.txt.gz"); }),
            fmt::format("{}: truncated or corrupt gzip stream at compressed byte {} (unexpected end of file)",
                        t / "cut.txt.gz", gz.size() / 2));
}

TEST(DocumentsCompression, TruncatedZstdFails) {
  TempDir t;
  std::string zst = zstd(varied_lines(20000));
  write_file(t / "cut.txt.zst", zst.substr(0, zst.size() / 2));
  EXPECT_EQ(error_of([&] { read_docs(t / "cut.txt.zst"); }),
            fmt::format("{}: truncated or corrupt zstd stream at compressed byte {} (unexpected end of file)",
                        t / "cut.txt.zst", zst.size() / 2));
}

TEST(DocumentsCompression, SecondGzipMemberTruncatedFails) {
  TempDir t;
  std::string second = gzip("second\n");
  std::string cut = gzip("first\n") + second.substr(0, 10);
  write_file(t / "cut.txt.gz", cut);
  EXPECT_EQ(error_of([&] { read_docs(t / "cut.txt.gz"); }),
            fmt::format("{}: truncated or corrupt gzip stream at compressed byte {} (unexpected end of file)",
                        t / "cut.txt.gz", cut.size()));
}

TEST(DocumentsCompression, CorruptGzipFails) {
  TempDir t;
  std::string gz = gzip(varied_lines(20000));
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) gz[i] = char(~gz[i]);
  write_file(t / "bad.txt.gz", gz);
  std::string message = error_of([&] { read_docs(t / "bad.txt.gz"); });
  EXPECT_EQ(message.rfind(t / "bad.txt.gz: truncated or corrupt gzip stream at compressed byte ", 0), 0u) << message;
}

TEST(DocumentsCompression, NotCompressedAtAllFails) {
  TempDir t;
  write_file(t / "plain.txt.gz", "just text\n");
  write_file(t / "plain.txt.zst", "just text\n");
  EXPECT_EQ(error_of([&] { read_docs(t / "plain.txt.gz"); }),
            t / "plain.txt.gz: truncated or corrupt gzip stream at compressed byte 2 (incorrect header check)");
  EXPECT_EQ(error_of([&] { read_docs(t / "plain.txt.zst"); }),
            t / "plain.txt.zst: truncated or corrupt zstd stream at compressed byte 0 (Unknown frame descriptor)");
}

TEST(DocumentsCompression, EmptyCompressedFileFails) {
  TempDir t;
  write_file(t / "empty.txt.gz", "");
  write_file(t / "empty.txt.zst", "");
  EXPECT_EQ(error_of([&] { read_docs(t / "empty.txt.gz"); }),
            t / "empty.txt.gz: truncated or corrupt gzip stream at compressed byte 0 (unexpected end of file)");
  EXPECT_EQ(error_of([&] { read_docs(t / "empty.txt.zst"); }),
            t / "empty.txt.zst: truncated or corrupt zstd stream at compressed byte 0 (unexpected end of file)");
}

// ---------------------------------------------------------------- expanding specs

TEST(DocumentsExpand, TypeAndCompressionByExtension) {
  TempDir t;
  struct Case {
    const char* name;
    FileType type;
    Compression compression;
  };
  const Case cases[] = {
      {"a.txt", FileType::kText, Compression::kNone},     {"b.text", FileType::kText, Compression::kNone},
      {"c", FileType::kText, Compression::kNone},         {"d.md", FileType::kText, Compression::kNone},
      {"e.jsonl", FileType::kJsonl, Compression::kNone},  {"f.json", FileType::kJsonl, Compression::kNone},
      {"g.ndjson", FileType::kJsonl, Compression::kNone}, {"h.jsonl.gz", FileType::kJsonl, Compression::kGzip},
      {"i.txt.zst", FileType::kText, Compression::kZstd}, {"j.JSONL.GZ", FileType::kJsonl, Compression::kGzip},
      {"k.gz", FileType::kText, Compression::kGzip},      {"l.jsonl.zstd", FileType::kJsonl, Compression::kZstd},
  };
  for (const auto& c : cases) {
    write_file(t / c.name, "x");
    InputFile f = one_file(t / c.name);
    EXPECT_EQ(f.type, c.type) << c.name;
    EXPECT_EQ(f.compression, c.compression) << c.name;
  }
}

TEST(DocumentsExpand, OverrideSetsTheTypeButNotTheCompression) {
  TempDir t;
  write_file(t / "data.txt.gz", "x");
  write_file(t / "data.jsonl", "x");
  InputFile a = one_file(t / "data.txt.gz", FileType::kJsonl);
  EXPECT_EQ(a.type, FileType::kJsonl);
  EXPECT_EQ(a.compression, Compression::kGzip);
  EXPECT_EQ(one_file(t / "data.jsonl", FileType::kText).type, FileType::kText);
  EXPECT_EQ(one_file(t / "data.jsonl", std::nullopt).type, FileType::kJsonl);
}

TEST(DocumentsExpand, OverrideTextReadsJsonlAsLines) {
  TempDir t;
  write_file(t / "r.jsonl", "{\"text\": \"a\"}\n");
  EXPECT_EQ(read_docs(one_file(t / "r.jsonl", FileType::kText)), Docs{"{\"text\": \"a\"}"});
}

TEST(DocumentsExpand, SizeAndModificationTimeFromStat) {
  TempDir t;
  write_file(t / "a.txt", "12345");
  struct stat st {};
  ASSERT_EQ(::stat((t / "a.txt").c_str(), &st), 0);
  InputFile f = one_file(t / "a.txt");
  EXPECT_EQ(f.path, t / "a.txt");
  EXPECT_EQ(f.size, 5u);
  EXPECT_EQ(f.mtime_ns, int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec);
}

// The tree most expansion tests walk.
void make_tree(const TempDir& t) {
  for (const char* rel : {"d/b.txt", "d/a.txt", "d/a.jsonl", "d/sub/c.txt", "d/sub/deeper/e.txt", "d/sub/.hidden.txt",
                          "d/.git/config.txt", "d/x1.txt", "d/x2.txt", "d/x10.txt", "d/sub/deeper/a.txt"})
    write_file(t / rel, "x\n");
  fs::create_directories(t / "d/empty");
}

TEST(DocumentsExpand, FolderIsWalkedRecursivelySortedWithoutHiddenEntries) {
  TempDir t;
  make_tree(t);
  std::string d = t / "d";
  EXPECT_EQ(paths_of(expand_inputs({d}, std::nullopt, kKey)),
            (Paths{d + "/a.jsonl", d + "/a.txt", d + "/b.txt", d + "/sub/c.txt", d + "/sub/deeper/a.txt",
                   d + "/sub/deeper/e.txt", d + "/x1.txt", d + "/x10.txt", d + "/x2.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/"}, std::nullopt, kKey)).front(), d + "/a.jsonl");
}

TEST(DocumentsExpand, GlobStarQuestionMarkAndBrackets) {
  TempDir t;
  make_tree(t);
  std::string d = t / "d";
  EXPECT_EQ(paths_of(expand_inputs({d + "/*.txt"}, std::nullopt, kKey)),
            (Paths{d + "/a.txt", d + "/b.txt", d + "/x1.txt", d + "/x10.txt", d + "/x2.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/x?.txt"}, std::nullopt, kKey)), (Paths{d + "/x1.txt", d + "/x2.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/[ab].*"}, std::nullopt, kKey)),
            (Paths{d + "/a.jsonl", d + "/a.txt", d + "/b.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/[!ab]*.txt"}, std::nullopt, kKey)),
            (Paths{d + "/x1.txt", d + "/x10.txt", d + "/x2.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/*/c.txt"}, std::nullopt, kKey)), (Paths{d + "/sub/c.txt"}));
}

TEST(DocumentsExpand, GlobDoubleStarAtAnyDepth) {
  TempDir t;
  make_tree(t);
  std::string d = t / "d";
  EXPECT_EQ(paths_of(expand_inputs({d + "/**/a.txt"}, std::nullopt, kKey)),
            (Paths{d + "/a.txt", d + "/sub/deeper/a.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/sub/**"}, std::nullopt, kKey)),
            (Paths{d + "/sub/c.txt", d + "/sub/deeper/a.txt", d + "/sub/deeper/e.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/**/*.jsonl"}, std::nullopt, kKey)), (Paths{d + "/a.jsonl"}));
}

TEST(DocumentsExpand, GlobNamesHiddenEntriesOnlyExplicitly) {
  TempDir t;
  make_tree(t);
  std::string d = t / "d";
  EXPECT_EQ(paths_of(expand_inputs({d + "/sub/*.txt"}, std::nullopt, kKey)), (Paths{d + "/sub/c.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/sub/.*.txt"}, std::nullopt, kKey)), (Paths{d + "/sub/.hidden.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/.git/*"}, std::nullopt, kKey)), (Paths{d + "/.git/config.txt"}));
  EXPECT_EQ(paths_of(expand_inputs({d + "/.git"}, std::nullopt, kKey)), (Paths{d + "/.git/config.txt"}));
}

TEST(DocumentsExpand, RelativeGlobKeepsRelativePaths) {
  TempDir t;
  make_tree(t);
  struct InFolder {  // back to the original folder even if expand_inputs throws
    fs::path before = fs::current_path();
    explicit InFolder(const fs::path& p) { fs::current_path(p); }
    ~InFolder() { fs::current_path(before); }
  } in_d(t / "d");
  EXPECT_EQ(paths_of(expand_inputs({"x*.txt", "sub/c.txt"}, std::nullopt, kKey)),
            (Paths{"x1.txt", "x10.txt", "x2.txt", "sub/c.txt"}));
}

TEST(DocumentsExpand, ListKeepsSpecOrderAndSortsWithinEach) {
  TempDir t;
  make_tree(t);
  std::string d = t / "d";
  EXPECT_EQ(paths_of(expand_inputs({d + "/x*.txt", d + "/b.txt", d + "/sub/deeper"}, std::nullopt, kKey)),
            (Paths{d + "/x1.txt", d + "/x10.txt", d + "/x2.txt", d + "/b.txt", d + "/sub/deeper/a.txt",
                   d + "/sub/deeper/e.txt"}));
}

TEST(DocumentsExpand, SpecMatchingNoFileFails) {
  TempDir t;
  make_tree(t);
  std::string d = t / "d";
  EXPECT_EQ(error_of([&] {
              expand_inputs({d + "/a.txt", d + "/*.csv"}, std::nullopt, kKey);
            }),
            "data.corpus: '" + d + "/*.csv' matches no file");
  EXPECT_EQ(error_of([&] { expand_inputs({d + "/empty"}, std::nullopt, kKey); }),
            "data.corpus: '" + d + "/empty' matches no file");
}

TEST(DocumentsExpand, FolderWithOnlyHiddenFilesMatchesNothing) {
  TempDir t;
  write_file(t / "h/.a.txt", "x\n");
  write_file(t / "h/.cache/b.txt", "x\n");
  EXPECT_EQ(error_of([&] { expand_inputs({t / "h"}, std::nullopt, kKey); }),
            "data.corpus: '" + t / "h" + "' matches no file");
}

TEST(DocumentsExpand, MissingFileMatchesNothing) {
  TempDir t;
  EXPECT_EQ(error_of([&] { expand_inputs({t / "nope.txt"}, std::nullopt, kKey); }),
            "data.corpus: '" + t / "nope.txt" + "' matches no file");
  EXPECT_EQ(error_of([&] { expand_inputs({t / "nope/**/*.txt"}, std::nullopt, kKey); }),
            "data.corpus: '" + t / "nope/**/*.txt" + "' matches no file");
}

TEST(DocumentsExpand, DanglingSymlinkFailsAsUnreadable) {
  TempDir t;
  fs::create_symlink(t / "gone.txt", t / "link.txt");
  EXPECT_EQ(error_of([&] { expand_inputs({t / "link.txt"}, std::nullopt, kKey); }),
            t / "link.txt: cannot read: No such file or directory (data.corpus)");
  write_file(t / "d/a.txt", "x\n");
  fs::create_symlink(t / "gone.txt", t / "d/b.txt");
  EXPECT_EQ(error_of([&] { expand_inputs({t / "d"}, std::nullopt, kKey); }),
            t / "d/b.txt: cannot read: No such file or directory (data.corpus)");
  EXPECT_EQ(error_of([&] { expand_inputs({t / "d/*.txt"}, std::nullopt, kKey); }),
            t / "d/b.txt: cannot read: No such file or directory (data.corpus)");
}

// Root reads a mode-000 file, so as root the check runs in a child that
// has dropped to uid 65534 (nobody), where the permission applies.
TEST(DocumentsExpand, UnreadableFileFails) {
  TempDir t;
  fs::permissions(t.path(), fs::perms::all);
  write_file(t / "secret.txt", "x\n");
  fs::permissions(t / "secret.txt", fs::perms::none);
  const std::string want = t / "secret.txt: cannot read: Permission denied (data.corpus)";
  if (::geteuid() != 0) {
    EXPECT_EQ(error_of([&] { expand_inputs({t / "secret.txt"}, std::nullopt, kKey); }), want);
    return;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    ::_exit(error_of([&] { expand_inputs({t / "secret.txt"}, std::nullopt, kKey); }) == want ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "as uid 65534: 1 = another message than '" << want << "', 2 = setuid failed";
}

TEST(DocumentsExpand, SpecialFileNamedExplicitlyFails) {
  TempDir t;
  ASSERT_EQ(::mkfifo((t / "pipe").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { expand_inputs({t / "pipe"}, std::nullopt, kKey); }),
            t / "pipe: not a regular file or a folder (data.corpus)");
}

}  // namespace
