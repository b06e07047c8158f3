#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace minivit_test {

static std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult run_minivit(const std::string& args) {
  TempDir io("run");
  std::string cmd = std::string(MINIVIT_EXE) + " " + args + " >" + io.str("out") + " 2>" +
                    io.str("err") + " </dev/null";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(io.path / "out");
  r.err = slurp(io.path / "err");
  return r;
}

}  // namespace minivit_test
