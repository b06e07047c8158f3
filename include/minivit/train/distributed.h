#pragma once
// Data-parallel training over MPI: the few collective operations the trainer needs, behind
// one door. In a build configured with -DMINIVIT_MPI=ON and a process started by an MPI
// launcher (mpirun, or srun with PMIx/PMI), they run over MPI_COMM_WORLD; otherwise the
// process is a group of one and every call is trivial, so the trainer reads the same either
// way and the plain build has no MPI in it.
//
// Failure never hangs a job: every wait is bounded (MINIVIT_MPI_TIMEOUT seconds, default
// 600, covers rank 0 validating while the others wait), MPI errors are fatal to the job, and
// abort_job() ends every rank.
#include <cstdint>
#include <exception>

namespace minivit::distributed {

// Starts MPI when a launcher started this process, and ends it on destruction. One per
// process, for the lifetime of the command that trains.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

int rank();             // 0 .. ranks() - 1
int ranks();            // 1 without a launcher or without MPI
int ranks_on_host();    // of this job, on this machine (shares its cores)
inline bool is_root() { return rank() == 0; }

// In place: the element-wise sum over all ranks, identical on every rank.
void allreduce_sum(float* data, int64_t n);
void allreduce_sum(double* data, int64_t n);
// In place: rank 0's values on every rank.
void broadcast(float* data, int64_t n);
// Returns when every rank has called it (for profiling: it separates waiting for the
// slowest rank from the time a collective itself takes).
void barrier();
// Whether every rank passed the same value (the check that replicas did not drift apart).
bool same_on_all_ranks(uint64_t value);

// What a collective setup learnt: whether any rank failed, and whether rank 0 did.
struct SetupOutcome {
  bool any_failed = false;
  bool root_failed = false;
};
SetupOutcome agree_on_setup(bool failed);

// Ends every rank of the job with exit status `code` (the caller has printed why).
[[noreturn]] void abort_job(int code);

// Thrown on ranks other than 0 for a failure that all ranks met alike and rank 0 reports:
// the process leaves with status 1 and prints nothing.
struct ReportedByRoot : std::exception {
  const char* what() const noexcept override { return "reported by rank 0"; }
};

// Time and bytes of allreduce_sum(float*) calls since the Session started (for
// MINIVIT_MPI_PROFILE): the wait for the slowest rank is part of the time.
struct AllreduceStats {
  int64_t calls = 0;
  double seconds = 0.0;
  double bytes = 0.0;  // of the buffers reduced, per rank
};
AllreduceStats allreduce_stats();

}  // namespace minivit::distributed
