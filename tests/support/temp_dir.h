#pragma once
// A fresh, empty folder under the system temp dir for one test, removed when
// the test ends. Named after the running test unless given a name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace ggtrain::test_support {

class TempDir {
 public:
  TempDir() : TempDir(std::string("ggtrain-") + current_test_name()) {}
  explicit TempDir(const std::string& name) {
    // The pid zero-padded to 7 digits (Linux's pid_max is at most 2^22): a
    // folder's path has the same length in every run, and so has every file
    // that records it (a run's saved config), whose sizes bad-input messages quote.
    std::string pid = std::to_string(::getpid());
    pid.insert(0, pid.size() < 7 ? 7 - pid.size() : 0, '0');
    path_ = std::filesystem::temp_directory_path() / (name + "-" + pid);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& rel) const { return (path_ / rel).string(); }
  std::string operator/(const std::string& rel) const { return file(rel); }
  // Names of everything in the folder, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  static std::string current_test_name() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  }
  std::filesystem::path path_;
};

}  // namespace ggtrain::test_support
