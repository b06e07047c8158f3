#include "minivit/train/distributed.h"

#include <cstdio>
#include <cstdlib>

#ifdef MINIVIT_MPI
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>
#endif

namespace minivit::distributed {

#ifndef MINIVIT_MPI

// The plain build: one process, nothing to agree with.
Session::Session() = default;
Session::~Session() = default;
int rank() { return 0; }
int ranks() { return 1; }
int ranks_on_host() { return 1; }
void allreduce_sum(float*, int64_t) {}
void allreduce_sum(double*, int64_t) {}
void broadcast(float*, int64_t) {}
void barrier() {}
bool same_on_all_ranks(uint64_t) { return true; }
SetupOutcome agree_on_setup(bool failed) { return {failed, failed}; }
void abort_job(int code) {
  std::fflush(stderr);
  std::exit(code);
}
AllreduceStats allreduce_stats() { return {}; }

#else

namespace {

using Clock = std::chrono::steady_clock;

struct State {
  bool started = false;  // MPI_Init ran here (a launcher started the process)
  int rank = 0, ranks = 1, ranks_on_host = 1;
  double timeout_s = 600.0;
  AllreduceStats stats;
  std::vector<float> sums;  // allreduce_sum's receive buffer
};
State g;

// A launcher leaves its mark in the environment: Open MPI's mpirun, PMIx (srun --mpi=pmix,
// Open MPI 4 and later), PMI (srun --mpi=pmi2, MPICH's hydra). Without one the program is
// the plain single process, with no singleton MPI start behind it.
bool started_by_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(name)) return true;
  return false;
}

double timeout_from_env() {
  const char* text = std::getenv("MINIVIT_MPI_TIMEOUT");
  if (!text) return 600.0;
  const double s = std::atof(text);
  return s > 0 ? s : 600.0;
}

// Waits for a non-blocking collective, for at most the timeout. A blocking collective would
// wait forever for a rank whose host vanished; this one ends the job instead. It spins for
// the first millisecond (a step's reduction usually completes within it), then sleeps
// between tests so that a waiting rank leaves the cores to ranks still computing.
void wait(MPI_Request& request, const char* what) {
  const auto start = Clock::now();
  int done = 0;
  for (int64_t polls = 0;; ++polls) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > g.timeout_s) {
      std::fprintf(stderr,
                   "minivit: error: rank %d waited %.0f s for the other ranks in %s (a rank or "
                   "host stopped answering; MINIVIT_MPI_TIMEOUT sets the limit); ending the job\n",
                   g.rank, waited, what);
      abort_job(1);
    }
    if (waited > 1e-3) {
      const timespec pause{0, 50'000};
      nanosleep(&pause, nullptr);
    }
  }
}

}  // namespace

Session::Session() {
  if (!started_by_launcher()) return;
  int provided = 0;
  // Only the main thread calls MPI; OpenMP and the batch prefetcher never do.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  g.started = true;
  // The default, said out loud: an MPI error ends the whole job, never a hang.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g.ranks);
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  MPI_Comm_size(host, &g.ranks_on_host);
  MPI_Comm_free(&host);
  g.timeout_s = timeout_from_env();
}

Session::~Session() {
  if (g.started) MPI_Finalize();
  g = State{};
}

int rank() { return g.rank; }
int ranks() { return g.ranks; }
int ranks_on_host() { return g.ranks_on_host; }

void allreduce_sum(float* data, int64_t n) {
  if (g.ranks == 1) return;
  const auto start = Clock::now();
  // One call for the whole flat buffer unless it exceeds MPI's int count. Not in place:
  // Open MPI's non-blocking allreduce then uses a bandwidth-optimal algorithm from 4 ranks
  // on (reduce-scatter and allgather) instead of a binomial tree, whose root handles
  // log2(R) whole buffers each way; the copy back costs far less than that.
  g.sums.resize(size_t(std::min<int64_t>(n, 1 << 30)));
  for (int64_t done = 0; done < n;) {
    const int count = int(std::min<int64_t>(n - done, 1 << 30));
    MPI_Request request;
    MPI_Iallreduce(data + done, g.sums.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
    wait(request, "the gradient sum");
    std::memcpy(data + done, g.sums.data(), sizeof(float) * size_t(count));
    done += count;
  }
  g.stats.calls += 1;
  g.stats.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  g.stats.bytes += double(n) * sizeof(float);
}

void allreduce_sum(double* data, int64_t n) {
  if (g.ranks == 1) return;
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data, int(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
  wait(request, "the step's metrics");
}

void broadcast(float* data, int64_t n) {
  if (g.ranks == 1) return;
  for (int64_t done = 0; done < n;) {
    const int count = int(std::min<int64_t>(n - done, 1 << 30));
    MPI_Request request;
    MPI_Ibcast(data + done, count, MPI_FLOAT, 0, MPI_COMM_WORLD, &request);
    wait(request, "the broadcast of rank 0's weights");
    done += count;
  }
}

void barrier() {
  if (g.ranks == 1) return;
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  wait(request, "a barrier");
}

bool same_on_all_ranks(uint64_t value) {
  if (g.ranks == 1) return true;
  // The largest value and the largest complement (the smallest value) agree iff all do.
  uint64_t v[2] = {value, ~value};
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &request);
  wait(request, "the comparison of the ranks' weights");
  return v[0] == ~v[1];
}

SetupOutcome agree_on_setup(bool failed) {
  if (g.ranks == 1) return {failed, failed};
  int v[2] = {failed ? 1 : 0, failed && g.rank == 0 ? 1 : 0};
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
  wait(request, "setup");
  return {v[0] > 0, v[1] > 0};
}

void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (g.started) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

AllreduceStats allreduce_stats() { return g.stats; }

#endif

}  // namespace minivit::distributed
