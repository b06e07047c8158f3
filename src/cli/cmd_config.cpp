// `minivit config`: every config key with its value and meaning, from the reader's own table,
// as a TOML file train reads back: the defaults, or a file with its --set overrides applied.
#include <cstdio>

#include "minivit/cli/commands.h"
#include "minivit/formats/config_file.h"

namespace minivit {

int run_config(const ConfigOptions& options) {
  const bool defaults = options.config_path.empty();
  const Config config = defaults ? parse_config("", "the defaults", options.sets)
                                 : load_config(options.config_path, options.sets);
  std::printf("# minivit config: %s%s; every key with its meaning (docs/config.md).\n",
              defaults ? "the defaults" : options.config_path.c_str(),
              options.sets.empty() ? "" : ", with --set applied");
  std::fputs(config_to_commented_toml(config).c_str(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace minivit
