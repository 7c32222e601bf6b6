#pragma once
// SIGINT/SIGTERM during a run, taken without a signal handler.
//
// oneDNN 2.6's JIT sgemm kernels (Debian 12) point rsp at heap memory while
// they run, so a signal handler invoked during a GEMM pushes its frame onto
// the heap and corrupts it (oneDNN issue #4845, fixed upstream in PR #4855;
// "corrupted size vs. prev_size" about once in 20 interrupted runs). So the
// two signals are blocked in every thread for the whole run (the calling
// thread, OpenMP's pool, and every thread started later, which inherit the
// mask) and taken by a thread of our own with sigtimedwait(): no handler
// frame is ever pushed anywhere.
//  - Before arm() (tokenizer training, corpus preparation) and after the
//    first signal once armed, a signal acts as it would have without us
//    (the previous disposition: by default the process ends).
//  - Once armed, the first signal only sets the flag that the step loop
//    reads after each step: finish the step, checkpoint, exit 0.
// A signal the process was started with ignored (nohup, `cmd &`) stays
// ignored. The calling thread's mask is restored by the destructor.
#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

namespace ggtrain::train {

class StopSignals {
 public:
  StopSignals();  // before any other thread of the run exists
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  void arm() { armed_ = true; }
  // The first signal received once armed (SIGINT or SIGTERM), else 0.
  int caught() const { return caught_; }

 private:
  void wait_loop();

  sigset_t set_{}, old_mask_{};
  std::thread waiter_;
  std::atomic<bool> stop_{false}, armed_{false};
  std::atomic<int> caught_{0};
};

// "SIGINT", "SIGTERM" or "signal N".
std::string signal_name(int sig);

}  // namespace ggtrain::train
