// minivit: parses the command line and hands over to one command (see commands.h).
#include <CLI/CLI.hpp>
#include <exception>

#include "minivit/cli/commands.h"
#include "minivit/core/config.h"
#include "minivit/core/error.h"
#include "minivit/kernels/runtime.h"

// --threads of the commands that run a checkpoint (eval, attention, predict).
static void add_threads_option(CLI::App* command, int& threads) {
  command
      ->add_option("--threads", threads,
                   "Threads (0: all cores; default: the checkpoint's train.threads)")
      ->check(CLI::Range(0, minivit::kMaxThreads));
}

int main(int argc, char** argv) {
  minivit::restart_with_tuned_runtime(argv);
  CLI::App app{
      "minivit " MINIVIT_VERSION
      ": a Vision Transformer trainer written from scratch.\n"
      "Train from a TOML config, evaluate checkpoints, inspect attention maps.\n"
      "Run `minivit COMMAND --help` for the options of each command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", MINIVIT_VERSION);

  minivit::TrainOptions train;
  CLI::App* train_cmd = app.add_subcommand(
      "train", "Train a model from a config file; writes checkpoints, metrics.jsonl, "
               "curves.png and eval.json into the run directory.");
  train_cmd->add_option("--config", train.config_path,
                        "TOML config file (optional with --resume: the run's config.toml)");
  train_cmd->add_option("--set", train.sets,
                        "Override one key, e.g. --set optim.lr=5e-4 (repeatable; wins over the file)");
  train_cmd->add_option("--out", train.out_dir, "Run directory (default: train.out_dir)");
  train_cmd->add_option("--resume", train.resume_dir,
                        "Continue the interrupted run in this directory exactly where it stopped");
  train_cmd->add_option("--init", train.init_path,
                        "Start from the weights in this .safetensors file (timm names and shapes)")
      ->check(CLI::ExistingFile);

  minivit::EvalOptions eval;
  CLI::App* eval_cmd = app.add_subcommand(
      "eval", "Evaluate a checkpoint: top-1, top-5, loss, per-class accuracy, confusion matrix.");
  eval_cmd->add_option("--checkpoint", eval.checkpoint, "Checkpoint (.safetensors) written by train")
      ->required();
  eval_cmd->add_option("--data", eval.data_path,
                       "Dataset path (default: data.path stored in the checkpoint)");
  eval_cmd->add_option("--split", eval.split, "test, val or train (default: test)")
      ->check(CLI::IsMember({"test", "val", "train"}));
  eval_cmd->add_option("--json", eval.json_path, "Also write the results as JSON to this file");
  add_threads_option(eval_cmd, eval.threads);

  minivit::AttentionOptions attention;
  CLI::App* attention_cmd = app.add_subcommand(
      "attention",
      "Show where a checkpoint looks in an image and why it chose its class. Writes the softmax "
      "attention of every layer and head (attention.npy, float32 [layers, heads, T, T], T = 1 + "
      "patches with the CLS token first, or T = patches with model.pool = mean), attention rollout "
      "(rollout.npy, [grid, grid]), the class-specific gradient rollout from the model's own backward "
      "(grad_rollout.npy, [grid, grid]), the normalised input (input.npy), pictures, summary.json and "
      "index.html: an explorer to open in a browser, where clicking any patch shows where it looks in "
      "every layer and head. With --count N or several --image: one such folder per image and a "
      "gallery index.html, misclassified images first. With --stats: the mean attention distance and "
      "entropy per layer and head (stats.json, stats.png).");
  attention_cmd->add_option("--checkpoint", attention.checkpoint, "Checkpoint (.safetensors) written by train")
      ->required();
  attention_cmd->add_option("--image", attention.images,
                            "Image file (PNG, JPEG, BMP, TGA...), converted to the model's channels and "
                            "size and normalised as in training; repeat it for several images");
  attention_cmd->add_option("--index", attention.index,
                            "Or: image N of a split of the checkpoint's dataset (0-based)")
      ->check(CLI::NonNegativeNumber);
  attention_cmd->add_option("--count", attention.count,
                            "Or: the first N images of the split, one folder each and a gallery "
                            "(more than the split holds: all of them)")
      ->check(CLI::NonNegativeNumber);
  attention_cmd->add_option("--split", attention.split,
                            "Split for --index, --count and --stats: test (default), val or train");
  attention_cmd->add_option("--out", attention.out_dir, "Directory to write the files into (created if needed)")
      ->required();
  attention_cmd->add_option("--fusion", attention.fusion,
                            "How rollout combines the heads of a layer: mean (default), max or min");
  attention_cmd->add_option("--discard", attention.discard,
                            "Rollout: zero this fraction of the smallest fused weights in each layer, "
                            "never those on a CLS column (default 0)");
  attention_cmd->add_option("--class", attention.class_index,
                            "Class the gradient rollout explains, 0 to classes-1 (default: the predicted class)");
  attention_cmd->add_flag("--stats", attention.stats,
                          "Attention distance and entropy per layer and head over the images; alone, over the "
                          "whole split");
  add_threads_option(attention_cmd, attention.threads);

  minivit::PredictOptions predict;
  CLI::App* predict_cmd = app.add_subcommand(
      "predict", "Classify image files: the top classes and their probabilities for each image.");
  predict_cmd->add_option("--checkpoint", predict.checkpoint, "Checkpoint (.safetensors) written by train")
      ->required();
  predict_cmd->add_option("--topk", predict.topk, "Classes shown per image (default 5)");
  add_threads_option(predict_cmd, predict.threads);
  predict_cmd->add_option("--json", predict.json_path,
                          "Also write the predictions as JSON to this file: {\"checkpoint\", \"predictions\": "
                          "[{\"image\", \"top\": [{\"class\", \"index\", \"probability\"}, ...]}, ...]}");
  predict_cmd->add_option("IMAGE", predict.images,
                          "Image files (PNG, JPEG, BMP, TGA...), converted to the model's channels and "
                          "size and normalised as in training")
      ->required();

  std::string info_path;
  CLI::App* info_cmd = app.add_subcommand(
      "info", "Show a checkpoint's config, parameter count, step and accuracy.");
  info_cmd->add_option("FILE", info_path, "A .safetensors file")->required();

  minivit::BenchOptions bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench",
      "Measure training and evaluation speed and single-image latency at a config's shapes "
      "(synthetic data).");
  bench_cmd->add_option("--config", bench.config_path, "TOML config file")->required();
  bench_cmd->add_option("--set", bench.sets, "Override one key (repeatable)");
  bench_cmd->add_option("--steps", bench.steps, "Timed training steps and evaluation batches (default 20)");
  bench_cmd->add_option("--warmup", bench.warmup, "Untimed steps first (default 3)");
  bench_cmd->add_option("--latency-images", bench.latency_images,
                        "Single images timed one by one for the latency line: batch 1, one "
                        "thread, median and 99th percentile (default 1000, 0 skips it)");
  bench_cmd->add_flag("--threads-sweep", bench.threads_sweep,
                      "Measure at 1, 2, 4, ... threads up to the machine's cores (ignoring "
                      "train.threads) and print one row per count: images/s, the sgemm rate on "
                      "as many threads, and each one's scaling over one thread");
  bench_cmd->add_option("--json", bench.json_path, "Also write the results as JSON to this file");
  bench_cmd->footer(
      "Matrix products run on minivit's own kernels: AVX-512 ones when the build and the CPU "
      "have AVX-512, AVX2 ones when they have AVX2 and FMA, else OpenBLAS; "
      "MINIVIT_GEMM=openblas in the environment forces OpenBLAS, to compare them. Training "
      "steps compute the blocks' products as the config's train.precision says: \"bf16\" "
      "(the default config's) takes bf16-rounded inputs where "
      "the CPU has AVX512_BF16, on AMX tiles where it has those (MINIVIT_GEMM=avx512 keeps "
      "them on AVX512_BF16), and --set train.precision=fp32 measures the fp32 step. "
      "The sgemm line is the fp32 kernels' rate on the model's largest product. "
      "With model.patch_drop, training steps see the kept patches only; a config that ends "
      "on every patch (train.unmasked_epochs) gets a second train line for those steps. "
      "The latency line is what an embedded user waits for one prediction: one image at a "
      "time on one thread, forward only, after a warm-up, over a cycle of different images.");

  minivit::ExportOptions export_opts;
  CLI::App* export_cmd = app.add_subcommand(
      "export",
      "Write a dataset minivit can load (any data.format) as PNG files, "
      "DIR/train/<class>/<index>.png and DIR/test/<class>/<index>.png: the layout "
      "data.format = \"folder\" reads. Class names are made safe for file names "
      "(\"T-shirt/top\" -> T-shirt_top).");
  export_cmd->add_option("--config", export_opts.config_path, "TOML config file naming the dataset")
      ->required();
  export_cmd->add_option("--set", export_opts.sets, "Override one key, e.g. --set data.path=DIR (repeatable)");
  export_cmd->add_option("--out", export_opts.out_dir,
                         "Directory to create (must be missing or empty); appears only when complete")
      ->required();
  export_cmd->add_option("--split", export_opts.split, "train, test or all (default: all)")
      ->check(CLI::IsMember({"train", "test", "all"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (*train_cmd) return minivit::run_train(train);
    if (*eval_cmd) return minivit::run_eval(eval);
    if (*attention_cmd) return minivit::run_attention(attention);
    if (*predict_cmd) return minivit::run_predict(predict);
    if (*info_cmd) return minivit::run_info(info_path);
    if (*bench_cmd) return minivit::run_bench(bench);
    if (*export_cmd) return minivit::run_export(export_opts);
  } catch (const std::exception&) {
    return minivit::report_error("minivit", std::current_exception());
  }
  return 0;
}
