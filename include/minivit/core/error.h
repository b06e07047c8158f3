#pragma once
// One kind of error for everything a user can get wrong: bad config, bad data, bad
// checkpoint. main() prints its message as the one stderr line and exits non-zero.
#include <stdexcept>
#include <string>

namespace minivit {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace minivit
