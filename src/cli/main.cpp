// minivit: parses the command line (command_line.h) and hands over to one command.
#include <exception>

#include "minivit/cli/command_line.h"
#include "minivit/core/error.h"

int main(int argc, char** argv) {
  minivit::CommandLine command_line;
  try {
    command_line.app().parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return command_line.app().exit(e);
  }
  try {
    return command_line.run();
  } catch (const std::exception&) {
    return minivit::report_error("minivit", std::current_exception());
  }
}
