#pragma once
// The processes of one training run and the collectives data-parallel
// training needs. Under an MPI launcher (`mpirun -np N ggtrain train ...`)
// in a build with MPI (GGTRAIN_HAVE_MPI) they are MPI_COMM_WORLD's ranks;
// otherwise there is one process and every collective is the identity.
//
// Every collective must be called by every rank in the same order (MPI's
// rule); the non-blocking ones are started in that order and completed
// together by wait_all().
#include <cstdint>
#include <exception>
#include <span>
#include <string>

namespace ggtrain::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool root() const { return rank() == 0; }
  // "single process" or "Open MPI v4.1.4, 2 ranks": for messages.
  virtual std::string describe() const = 0;

  virtual void barrier() = 0;
  // In place, blocking: sum / max over ranks.
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_max(int64_t* data, int64_t n) = 0;
  // out[r] = value of rank r (out has size() entries).
  virtual void allgather(uint64_t value, uint64_t* out) = 0;
  // Rank r sends `send` (counts[r] floats); root receives them at
  // recv + displs[r]. recv is only read on root.
  virtual void gather(const float* send, float* recv, std::span<const int> counts, std::span<const int> displs,
                      int root) = 0;

  // Non-blocking, completed by wait_all(); buffers must stay untouched until then.
  // data[0, n): summed over ranks in place.
  virtual void start_allreduce(float* data, int64_t n) = 0;
  // send[0, sum counts): summed over ranks; rank r receives the sum of the
  // counts[r] elements at displs[r] into recv.
  virtual void start_reduce_scatter(const float* send, float* recv, std::span<const int> counts) = 0;
  // data: rank r's counts[r] elements at displs[r] are copied to every rank.
  virtual void start_allgather(float* data, std::span<const int> counts, std::span<const int> displs) = 0;
  // Lets started operations advance (MPI progresses them only inside calls).
  virtual void progress() = 0;
  virtual void wait_all() = 0;

  // Ends every rank of the job after a failure on this one: `message` is
  // printed once (by rank 0, or by this rank with its number when rank 0 did
  // not fail too) and the exit status is non-zero. Never returns.
  [[noreturn]] virtual void abort_all(const std::string& message) = 0;
  // Called once at the end of a normal run (MPI_Finalize).
  virtual void finalize() = 0;
};

// The run's processes, started on first use. Throws Error when an MPI
// launcher started several processes but this build has no MPI (they would
// otherwise all write the same run folder).
Communicator& world();
// Whether world() is already started (an error path must not start MPI).
bool world_started();
// Whether this binary was built with MPI (cmake found it).
bool built_with_mpi();
// Environment an MPI launcher sets: the number of processes it started, or
// 0 when none launched us.
int launcher_size();
// This process's rank as the launcher numbered it (0 when none launched us).
int launcher_rank();

// The single-process communicator (also what world() is without a launcher).
Communicator& single_process();

// What a failure says when it ends a run: an Error's text, "out of memory",
// or "train: " and another exception's text (std::filesystem, JSON, ...).
std::string failure_message(const std::exception& e);

// The one place a failure on this rank ends the others: under mpirun they
// would wait for it in their next collective forever. With several ranks
// started, abort_all(message) (does not return). Before the ranks met
// (arguments, config: every rank failed alike) every rank but the
// launcher's rank 0 exits at once, so one says why. One process: returns.
void end_every_rank(const std::string& message);

}  // namespace ggtrain::parallel
