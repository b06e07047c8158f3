#include "minivit/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "minivit/core/error.h"

namespace minivit {

RunLock::RunLock(const std::string& dir) {
  const std::string path = dir + "/" + file_name();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path + ": cannot open the run directory's lock file: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK)
      throw Error(path + ": cannot lock the run directory: " + std::strerror(err));
    std::string pid(holder, size_t(n > 0 ? n : 0));
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    throw Error(dir + ": another `minivit train` (process " + (pid.empty() ? std::string("unknown") : pid) +
                ") is running in this directory; wait for it, stop it, or choose another --out");
  }
  // Ours now: say who holds it, for the message a second trainer prints.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error(path + ": cannot write the lock file: " + std::strerror(err));
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays, empty of meaning
}

}  // namespace minivit
