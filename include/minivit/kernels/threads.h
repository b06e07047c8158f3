#pragma once
// The pool of OpenMP threads every parallel loop of minivit runs on, and how work is cut
// for it: by the machine, never by the thread count, so that results do not depend on
// train.threads.
namespace minivit {

// Sets the size of the thread pool (0 = all cores), pins BLAS to one thread and flushes
// denormal floats to zero on the pool's threads (see threads.cpp).
// Returns the number of threads in use.
int set_num_threads(int threads);
int num_threads();

// Most blocks a product or a sum over rows is cut into: the machine's core count, whatever
// the thread count, so the rounding (and a run's weights) does not depend on train.threads.
int max_work_blocks();

}  // namespace minivit
