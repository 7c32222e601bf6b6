// Communicator over MPI (built only when cmake found MPI: GGTRAIN_HAVE_MPI).
#include <malloc.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "parallel/distributed.h"
#include "util/error.h"

namespace ggtrain::parallel {

namespace {

int as_count(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX) fail("MPI {}: {} elements do not fit an MPI count", what, n);
  return int(n);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    // Open MPI allocates a temporary buffer in each (non-blocking)
    // collective. Fresh mmap()s every step (glibc's default above 128 KiB)
    // cost first-touch page faults each time, which made a 4 MB all-reduce
    // 20-50x slower (docs/scaling.md). Blocks up to 32 MiB (glibc's largest threshold;
    // gradient buckets stay below it, parallel/zero.h) come from the heap and
    // are reused instead; the heap gives memory back above 128 MiB free.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
    int initialized = 0;
    MPI_Initialized(&initialized);
    // The main thread and our progress thread call MPI, one at a time (mu_);
    // OpenMP's threads only compute.
    int provided = MPI_THREAD_SERIALIZED;
    if (!initialized) MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    else MPI_Query_thread(&provided);
    progress_thread_ = provided >= MPI_THREAD_SERIALIZED;
    // A communicator of our own: no other library's messages can match ours.
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  ~MpiCommunicator() override { stop_progress(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    {
      Lock l(mu_);
      MPI_Get_library_version(version, &len);
    }
    std::string v(version, size_t(len));
    v = v.substr(0, v.find_first_of(",\n"));  // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
    return fmt::format("{}, {} ranks", v, size_);
  }

  void barrier() override {
    Lock l(mu_);
    MPI_Barrier(comm_);
  }

  void allreduce_sum(double* data, int64_t n) override {
    Lock l(mu_);
    MPI_Allreduce(MPI_IN_PLACE, data, as_count(n, "allreduce"), MPI_DOUBLE, MPI_SUM, comm_);
  }
  void allreduce_sum(float* data, int64_t n) override {
    Lock l(mu_);
    MPI_Allreduce(MPI_IN_PLACE, data, as_count(n, "allreduce"), MPI_FLOAT, MPI_SUM, comm_);
  }
  void allreduce_max(int64_t* data, int64_t n) override {
    Lock l(mu_);
    MPI_Allreduce(MPI_IN_PLACE, data, as_count(n, "allreduce"), MPI_INT64_T, MPI_MAX, comm_);
  }
  void allgather(uint64_t value, uint64_t* out) override {
    Lock l(mu_);
    MPI_Allgather(&value, 1, MPI_UINT64_T, out, 1, MPI_UINT64_T, comm_);
  }
  void gather(const float* send, float* recv, std::span<const int> counts, std::span<const int> displs,
              int root) override {
    Lock l(mu_);
    MPI_Gatherv(send, counts[size_t(rank_)], MPI_FLOAT, recv, counts.data(), displs.data(), MPI_FLOAT, root, comm_);
  }

  void start_allreduce(float* data, int64_t n) override {
    started([&](MPI_Request* r) {
      MPI_Iallreduce(MPI_IN_PLACE, data, as_count(n, "allreduce"), MPI_FLOAT, MPI_SUM, comm_, r);
    });
  }
  void start_reduce_scatter(const float* send, float* recv, std::span<const int> counts) override {
    started([&](MPI_Request* r) { MPI_Ireduce_scatter(send, recv, counts.data(), MPI_FLOAT, MPI_SUM, comm_, r); });
  }
  void start_allgather(float* data, std::span<const int> counts, std::span<const int> displs) override {
    started([&](MPI_Request* r) {
      MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(), MPI_FLOAT, comm_, r);
    });
  }
  void progress() override {
    Lock l(mu_);
    test_pending();
  }
  void wait_all() override {
    Lock l(mu_);
    if (pending_.empty()) return;
    MPI_Waitall(int(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE);
    pending_.clear();
  }

  // A failure seen by every rank at once (a bad config value, a NaN loss:
  // the loss and gradient norm are global) must print once, not N times:
  // rank 0 prints and aborts the job at once, any other rank waits a moment
  // first, and is normally killed by that abort before it prints. A failure
  // of one rank alone (its disk, its memory, an injected fault) prints that
  // rank's message after the wait. MPI_Abort ends every rank (no hang);
  // `mpirun -q` drops Open MPI's own note about the abort.
  [[noreturn]] void abort_all(const std::string& message) override {
    mu_.lock();  // the progress thread stays out of MPI (and our buffers) from here on
    if (rank_ != 0) std::this_thread::sleep_for(std::chrono::seconds(kGraceSeconds));
    const std::string line = rank_ == 0 ? fmt::format("ggtrain: error: {}\n", message)
                                        : fmt::format("ggtrain: error: rank {} of {}: {}\n", rank_, size_, message);
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }

  void finalize() override {
    if (finalized_) return;
    wait_all();
    stop_progress();
    MPI_Comm_free(&comm_);
    MPI_Finalize();
    finalized_ = true;
  }

 private:
  using Lock = std::lock_guard<std::mutex>;

  // Starts one operation (fn fills its request), and the progress thread if
  // it is not running yet.
  template <typename Fn>
  void started(Fn fn) {
    {
      Lock l(mu_);
      fn(&pending_.emplace_back());
    }
    if (progress_thread_ && !progress_.joinable()) progress_ = std::thread([this] { progress_loop(); });
    wake_.notify_one();
  }

  // Open MPI advances a non-blocking collective only inside MPI calls; the
  // rounds of a bucket's all-reduce would otherwise wait for the next
  // block's hook (little of the reduction hidden: docs/scaling.md). This
  // thread calls MPI_Testall every 50 us while operations are pending and
  // sleeps otherwise; it holds mu_ only for the call itself.
  void progress_loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (pending_.empty()) {
        wake_.wait(l);
        continue;
      }
      test_pending();
      l.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      l.lock();
    }
  }

  void test_pending() {  // with mu_ held
    if (pending_.empty()) return;
    int done = 0;
    MPI_Testall(int(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE);
    if (done) pending_.clear();
  }

  void stop_progress() {
    {
      Lock l(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    if (progress_.joinable()) progress_.join();
  }

  static constexpr int kGraceSeconds = 3;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> pending_;
  bool finalized_ = false, progress_thread_ = false, stop_ = false;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::thread progress_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace ggtrain::parallel
