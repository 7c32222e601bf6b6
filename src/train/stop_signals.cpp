#include "train/stop_signals.h"

#include <fmt/format.h>
#include <omp.h>
#include <pthread.h>

#include <algorithm>

namespace ggtrain::train {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_IGN) sigaddset(&set_, sig);
  }
  ::pthread_sigmask(SIG_BLOCK, &set_, &old_mask_);
  // OpenMP threads that already exist were started with the old mask.
  const sigset_t* set = &set_;
#pragma omp parallel num_threads(std::max(omp_get_max_threads(), omp_get_num_procs()))
  ::pthread_sigmask(SIG_BLOCK, set, nullptr);
  waiter_ = std::thread([this] { wait_loop(); });
}

StopSignals::~StopSignals() {
  stop_ = true;
  waiter_.join();
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);  // a pending signal acts now
}

void StopSignals::wait_loop() {
  const struct timespec tick { 0, 50 * 1000 * 1000 };
  while (!stop_) {
    siginfo_t info;
    const int sig = ::sigtimedwait(&set_, &info, &tick);
    if (sig <= 0) continue;
    if (armed_ && caught_ == 0) {
      caught_ = sig;
      continue;
    }
    // As if we had never blocked it: the disposition decides (by default
    // the process ends, killed by that signal).
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
    ::pthread_sigmask(SIG_BLOCK, &one, nullptr);  // a handler ran and returned
  }
}

std::string signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : fmt::format("signal {}", sig);
}

}  // namespace ggtrain::train
