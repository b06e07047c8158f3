// RunLock: one holder per directory, the holder named to the next one, the lock gone with
// its holder, and a lock file left behind by an ended process not blocking.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "minivit/core/error.h"
#include "minivit/train/run_lock.h"
#include "test_util.h"

using namespace minivit;
using namespace minivit_test;
using Catch::Matchers::Contains;

TEST_CASE("a run directory has one lock holder at a time", "[train][lock]") {
  TempDir tmp("run_lock");
  const std::string dir = tmp.str();
  {
    RunLock first(dir);
    CHECK(read_text(dir + "/" + RunLock::file_name()) == std::to_string(::getpid()) + "\n");
    // A second open of the lock, even in the same process, is refused with the holder's id.
    CHECK_THROWS_WITH(RunLock(dir), Contains(dir) && Contains("process " + std::to_string(::getpid())));
  }
  // Released with its holder; the file stays and does not block.
  CHECK_NOTHROW(RunLock(dir));
  write_text(dir + "/" + RunLock::file_name(), "999999\n");  // an ended process's leftover
  CHECK_NOTHROW(RunLock(dir));
  CHECK_THROWS_AS(RunLock(tmp.str("missing")), Error);
}
