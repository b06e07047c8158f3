#pragma once
// One owner per run directory: a trainer holds an advisory lock (flock) on DIR/.minivit.lock
// for its whole run, with its process id written in the file. A second trainer on the same
// directory is refused at once, naming the holder. The kernel drops the lock when its
// process ends however it ends, so a lock file left by a dead process never blocks.
#include <string>

namespace minivit {

class RunLock {
 public:
  // Takes the lock on `dir` (which must exist). Throws minivit::Error naming the directory
  // and the holder's process id when a live process holds it.
  explicit RunLock(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  static const char* file_name() { return ".minivit.lock"; }

 private:
  int fd_ = -1;
};

}  // namespace minivit
