#include "support/cli_runner.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace ggtrain::test_support {

pid_t spawn_cli(const std::vector<std::string>& args, const std::string& out_path, const CliOptions& opts) {
  // Everything the child needs is built before fork(): after it, only
  // async-signal-safe calls (the parent may have threads, e.g. OpenMP's).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (std::none_of(opts.env.begin(), opts.env.end(), [&](const auto& p) { return p.first == key; }))
      env_strings.push_back(kv);
  }
  for (const auto& [k, v] : opts.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0) ::_exit(126);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  ::close(fd);
  if (opts.file_size_limit > 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // stays ignored across exec: write() fails with EFBIG
    struct rlimit rl {
      opts.file_size_limit, opts.file_size_limit
    };
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(125);
  }
  if (opts.as_nobody && ::geteuid() == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(124);
  }
  ::execve(argv[0], argv.data(), envp.data());
  ::_exit(127);
}

CliResult wait_cli(pid_t pid, const std::string& out_path) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliResult r;
  r.status = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
  std::ifstream in(out_path, std::ios::binary);
  r.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

CliResult run_cli(const std::vector<std::string>& args, const std::string& out_path, const CliOptions& opts) {
  return wait_cli(spawn_cli(args, out_path, opts), out_path);
}

std::string error_line(const std::string& output) {
  static const std::string prefix = "ggtrain: error: ";
  size_t p = output.find(prefix);
  if (p == std::string::npos) return "";
  p += prefix.size();
  return output.substr(p, output.find('\n', p) - p);
}

std::vector<std::string> tiny_train_args(const std::string& bin, const std::string& run_dir, const std::string& corpus,
                                         const std::vector<std::string>& sets) {
  std::vector<std::string> a{
      bin,     "train",          "--preset", "tiny", "--run-dir", run_dir, "--quiet", "--set", "data.corpus=" + corpus,
      "--set", "train.threads=1"};
  for (const auto& s : sets) a.insert(a.end(), {"--set", s});
  return a;
}

std::vector<std::string> resume_args(const std::string& bin, const std::string& run_dir,
                                     const std::vector<std::string>& sets) {
  std::vector<std::string> a{bin, "train", "--resume", "--run-dir", run_dir, "--quiet"};
  for (const auto& s : sets) a.insert(a.end(), {"--set", s});
  return a;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ggtrain::test_support
