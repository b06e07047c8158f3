#include "minivit/kernels/threads.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace minivit {

// Denormal floats (below 1.2e-38) appear as training goes on, and the CPU takes a slow
// path for each: the rate of a long run fell from 1849 to 1641 img/s by its third epoch,
// with backward's share of the profile growing, and held at 1952 once they were flushed.
// Flushing them to zero (FTZ for results, DAZ for inputs), as ML frameworks on CPU commonly
// do, changes nothing a float32 model can resolve.
static void flush_denormals_on_this_thread() {
#if defined(__SSE__)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ (bit 15) and DAZ (bit 6)
#endif
}

int set_num_threads(int threads) {
  if (threads <= 0) threads = omp_get_num_procs();
  openblas_set_num_threads(1);
  omp_set_num_threads(threads);
  // On this thread, whose setting threads created later inherit, and on the pool's
  // threads that exist already.
  flush_denormals_on_this_thread();
#pragma omp parallel num_threads(threads)
  flush_denormals_on_this_thread();
  return threads;
}

int num_threads() { return omp_get_max_threads(); }

static unsigned control_word() {
#if defined(__SSE__)
  return _mm_getcsr();
#else
  return 0;
#endif
}

static void set_control_word([[maybe_unused]] unsigned word) {
#if defined(__SSE__)
  _mm_setcsr(word);
#endif
}

DenormalsFlushed::DenormalsFlushed(int threads)
    : threads_(std::max(1, threads)), saved_(size_t(threads_)) {
  // Thread 0 of a team is the caller; the others are the pool's, the same ones in every team
  // of this size.
#pragma omp parallel num_threads(threads_)
  {
    saved_[size_t(omp_get_thread_num())] = control_word();
    flush_denormals_on_this_thread();
  }
}

DenormalsFlushed::~DenormalsFlushed() {
#pragma omp parallel num_threads(threads_)
  set_control_word(saved_[size_t(omp_get_thread_num())]);
}

int max_work_blocks() {
  static const int cores = omp_get_num_procs();
  return cores;
}

}  // namespace minivit
