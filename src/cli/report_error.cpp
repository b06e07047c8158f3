// The one stderr line a failed command ends with, and its exit status: what main() prints
// for an exception, and what a rank of a training job prints before its ranks leave
// together (cmd_train.cpp), so the line is written before mpirun can end the job.
#include <cstdio>
#include <new>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"

namespace minivit {

int report_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    std::fprintf(stderr, "minivit: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "minivit: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minivit: internal error: %s\n", e.what());
    return 2;
  }
}

}  // namespace minivit
