#pragma once
#include <omp.h>

#include <cstdint>
#include <vector>

// The pool of OpenMP threads every parallel loop of minivit runs on, and how work is cut
// for it: by the machine, never by the thread count, so that results do not depend on
// train.threads.
namespace minivit {

// Sets the size of the thread pool (0 = all cores), pins BLAS to one thread and flushes
// denormal floats to zero on the pool's threads (see threads.cpp).
// Returns the number of threads in use.
int set_num_threads(int threads);
int num_threads();

// Flushes denormal floats to zero on the calling thread and on the first `threads` threads of
// its OpenMP pool for the life of the object, as set_num_threads does for a whole run, then
// gives each thread its own setting back: the library's way, whose host program's
// floating-point environment is the host's. A trained model's activations make denormals,
// and each one takes the CPU's slow path (0.298 against 0.243 ms for one image).
class DenormalsFlushed {
 public:
  explicit DenormalsFlushed(int threads);
  ~DenormalsFlushed();
  DenormalsFlushed(const DenormalsFlushed&) = delete;
  DenormalsFlushed& operator=(const DenormalsFlushed&) = delete;

 private:
  int threads_;
  std::vector<unsigned> saved_;  // (threads): each pool thread's control word; [0] the caller's
};

// Most blocks a product or a sum over rows is cut into: the machine's core count, whatever
// the thread count, so the rounding (and a run's weights) does not depend on train.threads.
int max_work_blocks();

// Calls body(begin, end) on contiguous pieces of [0, n), one per thread of the pool, when
// `split` holds; else, or when the caller already runs inside a parallel region (vit.cpp
// takes chunks of the batch through the whole model that way), once on the calling thread:
// a nested region costs about a microsecond even for a team of one. Only for work whose
// result does not depend on where the pieces are cut (rows done independently).
template <class Body>
void for_ranges(int64_t n, bool split, Body&& body) {
  if (n <= 0) return;
  if (!split || n < 2 || omp_in_parallel() || omp_get_max_threads() < 2) {
    body(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    if (end > begin) body(begin, end);
  }
}

}  // namespace minivit
