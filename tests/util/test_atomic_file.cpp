// AtomicFileWriter: the destination holds either its old contents or the
// complete new ones, and no temporary file survives, whatever happens.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "quant/gguf_floats.h"
#include "support/temp_dir.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
namespace quant = ggtrain::quant;

using ggtrain::test_support::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }

TEST(AtomicFile, CommitCreatesFileWithContents) {
  TempDir dir;
  const std::string dest = dir.file("out.bin");
  {
    ggtrain::AtomicFileWriter w(dest);
    w.write("hello ", 6);
    w.write_zeros(3);
    w.write("world", 5);
    EXPECT_EQ(w.bytes_written(), 14u);
    EXPECT_FALSE(fs::exists(dest)) << "visible before commit";
    w.commit();
  }
  EXPECT_EQ(slurp(dest), std::string("hello \0\0\0world", 14));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.bin"});
  struct stat st {};
  ASSERT_EQ(::stat(dest.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "mkstemp's 0600 should be widened";
}

TEST(AtomicFile, CommitReplacesExistingFile) {
  TempDir dir;
  const std::string dest = dir.file("out.bin");
  spit(dest, "old contents that are longer");
  ggtrain::write_file_atomic(dest, "new", 3);
  EXPECT_EQ(slurp(dest), "new");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, LargeWriteZerosAndEmptyFile) {
  TempDir dir;
  {
    ggtrain::AtomicFileWriter w(dir.file("zeros"));
    w.write_zeros(100000);
    w.commit();
  }
  EXPECT_EQ(slurp(dir.file("zeros")), std::string(100000, '\0'));
  ggtrain::write_file_atomic(dir.file("empty"), nullptr, 0);
  EXPECT_TRUE(fs::exists(dir.file("empty")));
  EXPECT_EQ(fs::file_size(dir.file("empty")), 0u);
}

TEST(AtomicFile, AbandonedWriterLeavesNothing) {
  TempDir dir;
  const std::string dest = dir.file("new.bin");
  {
    ggtrain::AtomicFileWriter w(dest);
    w.write("partial", 7);
    EXPECT_EQ(dir.entries().size(), 1u) << "the temporary file exists while writing";
    EXPECT_NE(dir.entries()[0].find("new.bin.tmp."), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dest));
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicFile, AbandonedWriterLeavesExistingFileUntouched) {
  TempDir dir;
  const std::string dest = dir.file("keep.bin");
  spit(dest, "precious");
  {
    ggtrain::AtomicFileWriter w(dest);
    w.write("replacement that is never committed", 35);
  }
  EXPECT_EQ(slurp(dest), "precious");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"keep.bin"});
}

TEST(AtomicFile, MissingDirectoryIsAnErrorNamingThePath) {
  TempDir dir;
  const std::string dest = dir.file("no/such/dir/out.gguf");
  try {
    ggtrain::AtomicFileWriter w(dest);
    FAIL() << "created a file in a missing directory";
  } catch (const ggtrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dest), std::string::npos) << e.what();
  }
  ggtrain::gguf::GgufWriter gw;
  gw.set("k", ggtrain::gguf::Value::u32(1));
  try {
    gw.write(dest);
    FAIL() << "GgufWriter wrote into a missing directory";
  } catch (const ggtrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dest), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicFile, FailedRenameCleansUp) {
  // The destination is a non-empty directory, so rename() must fail.
  TempDir dir;
  const std::string dest = dir.file("occupied");
  fs::create_directories(dest + "/inside");
  try {
    ggtrain::AtomicFileWriter w(dest);
    w.write("x", 1);
    w.commit();
    FAIL() << "rename over a directory succeeded";
  } catch (const ggtrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dest), std::string::npos) << e.what();
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"occupied"});
  EXPECT_TRUE(fs::is_directory(dest + "/inside"));
}

// Runs `body` in a child whose files may not grow past `limit` bytes (the
// kernel then fails write() with EFBIG, as on a full disk). The child sends
// back the ggtrain::Error message, or a marker when no Error was thrown.
std::string run_with_file_size_limit(rlim_t limit, const std::function<void()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl {
      limit, limit
    };
    std::string msg;
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) {
      msg = "<setrlimit failed>";
    } else {
      try {
        body();
        msg = "<no error>";
      } catch (const ggtrain::Error& e) {
        msg = e.what();
      } catch (...) {
        msg = "<other exception>";
      }
    }
    ssize_t ignored = ::write(fds[1], msg.data(), msg.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "<child died>";
  return out;
}

TEST(AtomicFile, WriteFailureOnFullDiskKeepsOldFile) {
  TempDir dir;
  const std::string dest = dir.file("model.gguf");
  spit(dest, "the previous checkpoint");
  std::vector<float> big(64 * 1024, 0.5f);  // 256 KiB of F32, far over the limit
  const std::string msg = run_with_file_size_limit(16 * 1024, [&] {
    ggtrain::gguf::GgufWriter w;
    w.set("general.architecture", ggtrain::gguf::Value::str("llama"));
    quant::add_float_tensor(w, "big", ggtrain::gguf::TensorType::F32, {64, 1024}, big.data());
    w.write(dest);
  });
  EXPECT_NE(msg.find(dest), std::string::npos) << msg;
  EXPECT_NE(msg.find("write failed"), std::string::npos) << msg;
  EXPECT_EQ(slurp(dest), "the previous checkpoint");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.gguf"}) << "temporary file left";
}

TEST(AtomicFile, ShortWriteAtTheLimitIsNotMistakenForSuccess) {
  // The first write() is cut short at the limit rather than failing outright;
  // the writer must retry, get EFBIG and report it.
  TempDir dir;
  const std::string dest = dir.file("raw.bin");
  const std::string msg = run_with_file_size_limit(1000, [&] {
    ggtrain::AtomicFileWriter w(dest);
    std::string chunk(4096, 'x');
    w.write(chunk.data(), chunk.size());
    w.commit();
  });
  EXPECT_NE(msg.find(dest), std::string::npos) << msg;
  EXPECT_NE(msg.find("after 1000 bytes"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dest));
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
