// The command line's table: each command's options and help, one function per command.
#include "minivit/cli/command_line.h"

#include <cstdio>
#include <string>

#include "minivit/core/config.h"
#include "minivit/core/error.h"
#include "minivit/kernels/compute.h"

namespace minivit {

namespace {

// --threads of the commands that run a checkpoint (eval, attention, predict).
void add_threads_option(CLI::App* command, int& threads) {
  command
      ->add_option("--threads", threads,
                   "Threads (0: all cores; default: the checkpoint's train.threads)")
      ->check(CLI::Range(0, kMaxThreads));
}

// --checkpoint of the commands that run a checkpoint (eval, attention, predict).
void add_checkpoint_option(CLI::App* command, std::string& checkpoint) {
  command
      ->add_option("--checkpoint", checkpoint,
                   "Checkpoint (.safetensors) written by train; - reads standard input")
      ->required();
}

// CLI::ExistingFile, or "-" for standard input.
CLI::Validator existing_file_or_stdin() {
  return CLI::Validator(
      [](std::string& path) { return path == "-" ? std::string() : CLI::ExistingFile(path); },
      "FILE or -");
}

// Standard input can be read once: at most one "-" among a command's file arguments.
void check_one_stdin(const CLI::App& command) {
  int dashes = 0;
  for (const CLI::Option* option : command.get_options())
    for (const std::string& value : option->results()) dashes += value == "-";
  if (dashes > 1)
    throw Error("standard input (-) can be read once, but " + std::to_string(dashes) +
                " arguments of '" + command.get_name() + "' name it");
}

}  // namespace

CommandLine::CommandLine(bool check_files)
    : app_("minivit " MINIVIT_VERSION
           ": a Vision Transformer trainer written from scratch.\n"
           "Train from a TOML config, evaluate checkpoints, inspect attention maps.\n"
           "Run `minivit COMMAND --help` for the options of each command.") {
  app_.require_subcommand(1);
  app_.set_version_flag("--version", MINIVIT_VERSION);
  add_train(check_files);
  add_eval();
  add_attention();
  add_predict();
  add_info();
  add_bench();
  add_export();
  add_config();
}

std::string CommandLine::command() const {
  for (const CLI::App* command : app_.get_subcommands()) return command->get_name();
  return "";
}

int CommandLine::run() const {
  const std::string name = command();
  for (const CLI::App* chosen : app_.get_subcommands()) check_one_stdin(*chosen);
  // A MINIVIT_ISA or MINIVIT_GEMM that cannot be followed; train and bench say it among their
  // first lines.
  if (name == "eval" || name == "attention" || name == "predict")
    if (const std::string note = Compute::environment_note(); !note.empty())
      std::fprintf(stderr, "%s\n", note.c_str());
  if (name == "train") return run_train(train);
  if (name == "eval") return run_eval(eval);
  if (name == "attention") return run_attention(attention);
  if (name == "predict") return run_predict(predict);
  if (name == "info") return run_info(info_path);
  if (name == "bench") return run_bench(bench);
  if (name == "export") return run_export(export_options);
  if (name == "config") return run_config(config);
  return 0;
}

void CommandLine::add_train(bool check_files) {
  CLI::App* command = app_.add_subcommand(
      "train", "Train a model from a config file; writes checkpoints, metrics.jsonl, "
               "curves.png and eval.json into the run directory.");
  command->add_option("--config", train.config_path,
                      "TOML config file, - for standard input (optional with --resume: the "
                      "run's config.toml)");
  command->add_option("--set", train.sets,
                      "Override one key, e.g. --set optim.lr=5e-4 (repeatable; wins over the file)");
  command->add_option("--out", train.out_dir, "Run directory (default: train.out_dir)");
  command->add_option("--resume", train.resume_dir,
                      "Continue the interrupted run in this directory exactly where it stopped");
  CLI::Option* init = command->add_option(
      "--init", train.init_path,
      "Start from the weights in this .safetensors file (timm names and shapes; - reads "
      "standard input)");
  if (check_files) init->check(existing_file_or_stdin());
}

void CommandLine::add_eval() {
  CLI::App* command = app_.add_subcommand(
      "eval", "Evaluate a checkpoint: top-1, top-5, loss, per-class accuracy, confusion matrix.");
  add_checkpoint_option(command, eval.checkpoint);
  command->add_option("--data", eval.data_path,
                      "Dataset path (default: data.path stored in the checkpoint)");
  command->add_option("--split", eval.split, "test, val or train (default: test)")
      ->check(CLI::IsMember({"test", "val", "train"}));
  command->add_option("--json", eval.json_path, "Also write the results as JSON to this file");
  add_threads_option(command, eval.threads);
}

void CommandLine::add_attention() {
  CLI::App* command = app_.add_subcommand(
      "attention",
      "Show where a checkpoint looks in an image and why it chose its class. Writes the softmax "
      "attention of every layer and head (attention.npy, float32 [layers, heads, T, T], T = 1 + "
      "patches with the CLS token first, or T = patches with model.pool = mean or seq), attention rollout "
      "(rollout.npy, [grid, grid]), the class-specific gradient rollout from the model's own backward "
      "(grad_rollout.npy, [grid, grid]), the normalised input (input.npy), pictures, summary.json and "
      "index.html: an explorer to open in a browser, where clicking any patch shows where it looks in "
      "every layer and head. With --count N or several --image: one such folder per image and a "
      "gallery index.html, misclassified images first. With --stats: the mean attention distance and "
      "entropy per layer and head (stats.json, stats.png).");
  AttentionOptions& options = attention;
  add_checkpoint_option(command, options.checkpoint);
  command->add_option("--image", options.images,
                      "Image file (PNG, JPEG, BMP, TGA...; - reads standard input), converted to "
                      "the model's channels and size and normalised as in training; repeat it "
                      "for several images");
  command->add_option("--index", options.index,
                      "Or: image N of a split of the checkpoint's dataset (0-based)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--count", options.count,
                      "Or: the first N images of the split, one folder each and a gallery "
                      "(more than the split holds: all of them)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--split", options.split,
                      "Split for --index, --count and --stats: test (default), val or train");
  command->add_option("--out", options.out_dir, "Directory to write the files into (created if needed)")
      ->required();
  command->add_option("--fusion", options.fusion,
                      "How rollout combines the heads of a layer: mean (default), max or min");
  command->add_option("--discard", options.discard,
                      "Rollout: zero this fraction of the smallest fused weights in each layer, "
                      "never those on a CLS column (default 0)");
  command->add_option("--class", options.class_index,
                      "Class the gradient rollout explains, 0 to classes-1 (default: the predicted class)");
  command->add_flag("--stats", options.stats,
                    "Attention distance and entropy per layer and head over the images; alone, over the "
                    "whole split");
  add_threads_option(command, options.threads);
}

void CommandLine::add_predict() {
  CLI::App* command = app_.add_subcommand(
      "predict", "Classify image files: the top classes and their probabilities for each image.");
  add_checkpoint_option(command, predict.checkpoint);
  command->add_option("--topk", predict.topk, "Classes shown per image (default 5)");
  add_threads_option(command, predict.threads);
  command->add_option("--json", predict.json_path,
                      "Also write the predictions as JSON to this file: {\"checkpoint\", \"predictions\": "
                      "[{\"image\", \"top\": [{\"class\", \"index\", \"probability\"}, ...]}, ...]}");
  command->add_option("IMAGE", predict.images,
                      "Image files (PNG, JPEG, BMP, TGA...; - reads standard input), converted to "
                      "the model's channels and size and normalised as in training")
      ->required();
}

void CommandLine::add_info() {
  CLI::App* command = app_.add_subcommand(
      "info", "Show a checkpoint's config, parameter count, step and accuracy.");
  command->add_option("FILE", info_path, "A .safetensors file; - reads standard input")
      ->required();
}

void CommandLine::add_bench() {
  CLI::App* command = app_.add_subcommand(
      "bench",
      "Measure training and evaluation speed and single-image latency at a config's shapes "
      "(synthetic data).");
  command->add_option("--config", bench.config_path, "TOML config file")->required();
  command->add_option("--set", bench.sets, "Override one key (repeatable)");
  command->add_option("--steps", bench.steps, "Timed training steps and evaluation batches (default 20)");
  command->add_option("--warmup", bench.warmup, "Untimed steps first (default 3)");
  command->add_option("--rounds", bench.rounds,
                      "Measure the training, evaluation and sgemm rates this many times, one "
                      "round after another, and print the best of each with a line of their "
                      "ranges: on a machine others share, the best of several rounds is the "
                      "closest to its own rate (default 1)");
  command->add_option("--latency-images", bench.latency_images,
                      "Single images timed one by one for the latency line: batch 1, median "
                      "and 99th percentile (default 1000, 0 skips it)");
  command->add_option("--latency-threads", bench.latency_threads,
                      "Threads each of those images runs on (default 1, what one core gives; "
                      "on more, each image's layers split across them)");
  command->add_flag("--threads-sweep", bench.threads_sweep,
                    "Measure at 1, 2, 4, ... threads up to the machine's cores (ignoring "
                    "train.threads) and print one row per count: images/s, the sgemm rate on "
                    "as many threads, and each one's scaling over one thread");
  command->add_flag("--loader", bench.loader,
                    "Also time the training batches of the config's own dataset (data.path) as "
                    "the trainer's prefetch thread makes them, reading, augmentation and all, on "
                    "one thread, and print their rate beside the training step's: the data "
                    "path keeps up while it is well ahead");
  command->add_option("--json", bench.json_path, "Also write the results as JSON to this file");
  command->footer(
      "Matrix products run on minivit's own kernels: AVX-512 ones when the build and the CPU "
      "have AVX-512, AVX2 ones when they have AVX2 and FMA, else OpenBLAS; "
      "MINIVIT_GEMM=openblas in the environment forces OpenBLAS, to compare them, and "
      "MINIVIT_ISA=avx2 or x86-64 runs the layers and kernels as a CPU of that level would. "
      "Training "
      "steps compute the blocks' products as the config's train.precision says: \"bf16\" "
      "(the default config's) takes bf16-rounded inputs where "
      "the CPU has AVX512_BF16, on AMX tiles where it has those (MINIVIT_GEMM=avx512 keeps "
      "them on AVX512_BF16), and --set train.precision=fp32 measures the fp32 step. "
      "The sgemm line is the fp32 kernels' rate on the model's largest product; with bf16 "
      "products a bf16 line gives their rate on it, and a note says when fp32's is the "
      "higher. "
      "With model.patch_drop, training steps see the kept patches only; a config that ends "
      "on every patch (train.unmasked_epochs) gets a second train line for those steps. "
      "The latency line is what an embedded user waits for one prediction: one image at a "
      "time on one thread (--latency-threads for more), forward only, after a warm-up, over "
      "a cycle of different images.");
}

void CommandLine::add_export() {
  CLI::App* command = app_.add_subcommand(
      "export",
      "Write a dataset minivit can load (any data.format) as PNG files, "
      "DIR/train/<class>/<index>.png and DIR/test/<class>/<index>.png: the layout "
      "data.format = \"folder\" reads. Class names are made safe for file names "
      "(\"T-shirt/top\" -> T-shirt_top).");
  command->add_option("--config", export_options.config_path, "TOML config file naming the dataset")
      ->required();
  command->add_option("--set", export_options.sets,
                      "Override one key, e.g. --set data.path=DIR (repeatable)");
  command->add_option("--out", export_options.out_dir,
                      "Directory to create (must be missing or empty); appears only when complete")
      ->required();
  command->add_option("--split", export_options.split, "train, test or all (default: all)")
      ->check(CLI::IsMember({"train", "test", "all"}));
}

void CommandLine::add_config() {
  CLI::App* command = app_.add_subcommand(
      "config",
      "Print every config key with its value and its meaning, as a TOML file train reads: "
      "the defaults, or a config file with its --set overrides applied.");
  command->add_option("--config", config.config_path,
                      "TOML config file to resolve, - for standard input (default: print the "
                      "defaults)");
  command->add_option("--set", config.sets,
                      "Override one key, e.g. --set model.depth=6 (repeatable; wins over the file)");
}

}  // namespace minivit
