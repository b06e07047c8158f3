#pragma once
// The minivit program's command line: every command with its options and help text, parsed
// into the option structs of commands.h. main.cpp parses and runs it; the documentation test
// parses the command lines the docs show through this same table, so a documented option
// that does not exist fails a test.
#include <CLI/CLI.hpp>
#include <string>

#include "minivit/cli/commands.h"

namespace minivit {

class CommandLine {
 public:
  // With check_files false, options that name an input file do not check that it exists:
  // a documented command line may name a file an earlier line of the same page makes.
  explicit CommandLine(bool check_files = true);

  CLI::App& app() { return app_; }
  // The command the parsed line chose ("train", "eval", ...); empty before parsing.
  std::string command() const;
  // Runs the chosen command; returns the process exit status. Throws minivit::Error.
  int run() const;

  TrainOptions train;
  EvalOptions eval;
  AttentionOptions attention;
  PredictOptions predict;
  std::string info_path;
  BenchOptions bench;
  ExportOptions export_options;
  ConfigOptions config;

 private:
  void add_train(bool check_files);
  void add_eval();
  void add_attention();
  void add_predict();
  void add_info();
  void add_bench();
  void add_export();
  void add_config();

  CLI::App app_;
};

}  // namespace minivit
