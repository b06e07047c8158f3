// The one stderr line a failed program ends with, and its exit status: what minivit's main()
// prints for an exception, what a rank of a training job prints before its ranks leave
// together (cli/cmd_train.cpp), so the line is written before mpirun can end the job, and
// what the tools print (tools/).
#include "minivit/core/error.h"

#include <cstdio>
#include <new>

namespace minivit {

int report_error(const char* program, const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory\n", program);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
    return 2;
  }
}

}  // namespace minivit
