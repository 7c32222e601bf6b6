#include "util/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/clock.h"
#include "util/error.h"

extern char** environ;

namespace ggtrain {

namespace {

// Both ends close on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() { close_now(); }
  void close_now() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace

std::string CommandResult::failure() const {
  std::string what;
  if (timed_out) what = "did not finish in time and was killed";
  else if (output_capped) what = "printed more than the output limit and was stopped";
  else if (signal) what = fmt::format("was killed by signal {} ({})", signal, strsignal(signal));
  else what = fmt::format("exited with status {}", exit_code);
  const std::string line = last_line(err);
  return line.empty() ? what : fmt::format("{}: {}", what, line.substr(0, 300));
}

CommandResult run_command(const std::string& command, const std::string& input, double timeout_s, size_t max_output) {
  // stdin is a socket so that writing to a command that has exited fails
  // with EPIPE (MSG_NOSIGNAL) instead of raising SIGPIPE in the caller.
  int in_pair[2], out_pipe[2], err_pipe[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0)
    fail("cannot run '{}': socketpair: {}", command, strerror(errno));
  Fd in_parent{in_pair[0]}, in_child{in_pair[1]};
  if (pipe2(out_pipe, O_CLOEXEC) != 0) fail("cannot run '{}': pipe: {}", command, strerror(errno));
  Fd out_parent{out_pipe[0]}, out_child{out_pipe[1]};
  if (pipe2(err_pipe, O_CLOEXEC) != 0) fail("cannot run '{}': pipe: {}", command, strerror(errno));
  Fd err_parent{err_pipe[0]}, err_child{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_child.fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out_child.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_child.fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that a timeout kills what the shell started too.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the run blocks SIGINT/SIGTERM in its threads; the command must not
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) fail("cannot run '{}': {}", command, strerror(rc));
  in_child.close_now();
  out_child.close_now();
  err_child.close_now();
  for (int fd : {in_parent.fd, out_parent.fd, err_parent.fd}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  CommandResult r;
  size_t written = 0;
  if (input.empty()) in_parent.close_now();
  const double deadline = now_seconds() + timeout_s;
  char buf[65536];
  while (out_parent.fd >= 0 || err_parent.fd >= 0) {
    const double left = deadline - now_seconds();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd fds[3] = {{in_parent.fd, POLLOUT, 0}, {out_parent.fd, POLLIN, 0}, {err_parent.fd, POLLIN, 0}};
    if (poll(fds, 3, int(std::min(left, 1.0) * 1000) + 1) < 0 && errno != EINTR)
      fail("running '{}': poll: {}", command, strerror(errno));
    if (in_parent.fd >= 0 && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = send(in_parent.fd, input.data() + written, input.size() - written, MSG_NOSIGNAL);
      if (n > 0) written += size_t(n);
      // A command that stops reading early (or exits) gets no more input.
      if (written == input.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) in_parent.close_now();
    }
    for (auto [fd, text] : {std::pair{&out_parent, &r.out}, std::pair{&err_parent, &r.err}}) {
      const pollfd& p = fd == &out_parent ? fds[1] : fds[2];
      if (fd->fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fd->fd, buf, sizeof buf);
      if (n > 0) text->append(buf, size_t(n));
      else if (n == 0 || (errno != EAGAIN && errno != EINTR)) fd->close_now();
    }
    if (r.out.size() > max_output || r.err.size() > max_output) {
      r.output_capped = true;
      break;
    }
  }
  if (r.timed_out || r.output_capped) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace ggtrain
