#pragma once
// One kind of error for everything a user can get wrong: bad config, bad data, bad
// checkpoint. main() prints its message as the one stderr line and exits non-zero.
#include <exception>
#include <stdexcept>
#include <string>

namespace minivit {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Prints the one stderr line for a failed program ("PROGRAM: error: ..." for a user error or
// running out of memory, "PROGRAM: internal error: ..." for any other exception) and returns
// the exit status (1 or 2).
int report_error(const char* program, const std::exception_ptr& error);

}  // namespace minivit
