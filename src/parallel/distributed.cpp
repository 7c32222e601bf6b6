#include "parallel/distributed.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "util/error.h"

namespace ggtrain::parallel {

#ifdef GGTRAIN_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator();  // distributed_mpi.cpp
#endif

namespace {

// One process: every collective is the identity on its own data.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "single process"; }
  void barrier() override {}
  void allreduce_sum(double*, int64_t) override {}
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_max(int64_t*, int64_t) override {}
  void allgather(uint64_t value, uint64_t* out) override { out[0] = value; }
  void gather(const float* send, float* recv, std::span<const int> counts, std::span<const int> displs, int) override {
    if (recv + displs[0] != send) std::memmove(recv + displs[0], send, size_t(counts[0]) * sizeof(float));
  }
  void start_allreduce(float*, int64_t) override {}
  void start_reduce_scatter(const float* send, float* recv, std::span<const int> counts) override {
    if (recv != send) std::memmove(recv, send, size_t(counts[0]) * sizeof(float));
  }
  void start_allgather(float*, std::span<const int>, std::span<const int>) override {}
  void progress() override {}
  void wait_all() override {}
  [[noreturn]] void abort_all(const std::string& message) override {
    std::fprintf(stderr, "ggtrain: error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  void finalize() override {}
};

// The started world: the MPI communicator (owned here) or single_process().
std::unique_ptr<Communicator> g_mpi_world;
Communicator* g_world = nullptr;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end && *end == 0 && n > 0 && n < (1L << 24) ? int(n) : 0;
}

}  // namespace

int launcher_size() {
  // Open MPI's mpirun, then the PMI variables of Hydra (MPICH) and Slurm's srun --mpi.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (int n = env_int(name)) return n;
  return 0;
}

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (std::getenv(name)) return env_int(name);
  return 0;
}

bool built_with_mpi() {
#ifdef GGTRAIN_HAVE_MPI
  return true;
#else
  return false;
#endif
}

Communicator& single_process() {
  static SingleProcess one;
  return one;
}

bool world_started() { return g_world != nullptr; }

std::string failure_message(const std::exception& e) {
  if (dynamic_cast<const Error*>(&e)) return e.what();
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "out of memory";
  return fmt::format("train: {}", e.what());
}

void end_every_rank(const std::string& message) {
  if (!world_started()) {
    if (launcher_size() > 1 && launcher_rank() != 0) std::_Exit(1);
    return;
  }
  if (world().size() > 1) world().abort_all(message);
}

Communicator& world() {
  if (g_world) return *g_world;
  const int n = launcher_size();
#ifdef GGTRAIN_HAVE_MPI
  if (n > 0) {
    g_mpi_world = make_mpi_communicator();
    g_world = g_mpi_world.get();
    return *g_world;
  }
#else
  if (n > 1)
    fail("an MPI launcher started {} processes, but this ggtrain was built without MPI, so they "
         "cannot train together; install libopenmpi-dev and rebuild (cmake finds MPI), or run "
         "one process without mpirun",
         n);
#endif
  g_world = &single_process();
  return *g_world;
}

}  // namespace ggtrain::parallel
