#pragma once
// The commands of the minivit program, one source file each (cmd_*.cpp). command_line.cpp
// parses the command line into these option structs and calls the matching run_* function;
// each returns the process exit status and reports user errors by throwing minivit::Error.
#include <cstdint>
#include <string>
#include <vector>

namespace minivit {

struct TrainOptions {
  std::string config_path;        // --config
  std::vector<std::string> sets;  // --set section.key=value, in order
  std::string out_dir;            // --out (default: train.out_dir)
  std::string resume_dir;         // --resume
  std::string init_path;          // --init
};
int run_train(const TrainOptions& options);

struct EvalOptions {
  std::string checkpoint;
  std::string data_path;  // --data: overrides data.path from the checkpoint
  std::string split = "test";
  std::string json_path;
  int threads = -1;       // --threads N (0: all cores; -1: the checkpoint's train.threads)
};
int run_eval(const EvalOptions& options);

int run_info(const std::string& path);

struct AttentionOptions {
  std::string checkpoint;
  std::vector<std::string> images;  // --image FILE (repeatable), or
  int64_t index = -1;        // --index N of `split` (-1: not given), or
  int64_t count = -1;        // --count N: the first N images of `split` (-1: not given)
  std::string split;         // --split test|val|train with --index, --count, --stats (empty: test)
  std::string out_dir;
  std::string fusion = "mean";
  double discard = 0.0;
  int class_index = -1;      // --class K: the class the gradient rollout explains (-1: predicted)
  bool stats = false;        // --stats: attention distance and entropy per layer and head
  int threads = -1;          // --threads N (0: all cores; -1: the checkpoint's train.threads)
};
int run_attention(const AttentionOptions& options);

struct PredictOptions {
  std::string checkpoint;
  int topk = 5;
  std::vector<std::string> images;
  std::string json_path;  // also write the predictions here when set
  int threads = -1;       // --threads N (0: all cores; -1: the checkpoint's train.threads)
};
int run_predict(const PredictOptions& options);

struct BenchOptions {
  std::string config_path;
  std::vector<std::string> sets;
  int steps = 20;   // timed training steps and evaluation batches
  int warmup = 3;
  int rounds = 1;   // the whole measurement this many times, the best of each rate printed
  int latency_images = 1000;  // batch-1 forwards timed one by one; 0 skips them
  int latency_threads = 1;    // threads each of those forwards runs on
  bool threads_sweep = false;  // measure at 1, 2, 4, ... threads up to the cores, as a table
  bool loader = false;  // also time the config's real training batches on one thread
  std::string json_path;
};
int run_bench(const BenchOptions& options);

struct ExportOptions {
  std::string config_path;        // --config
  std::vector<std::string> sets;  // --set section.key=value, in order
  std::string out_dir;            // --out: a new or empty directory
  std::string split = "all";      // --split train|test|all
};
int run_export(const ExportOptions& options);

struct ConfigOptions {
  std::string config_path;        // --config (empty: the defaults)
  std::vector<std::string> sets;  // --set section.key=value, in order
};
int run_config(const ConfigOptions& options);

}  // namespace minivit
