// `minivit export`: writes any dataset minivit can load as a tree of PNG files,
// DIR/<split>/<class>/<index>.png, the layout that data.format = "folder" reads
// (data/png_tree.h writes it).
#include <chrono>
#include <cstdio>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/progress.h"
#include "minivit/data/data.h"
#include "minivit/data/png_tree.h"
#include "minivit/formats/config_file.h"
#include "minivit/kernels/threads.h"

namespace minivit {

using Clock = std::chrono::steady_clock;

int run_export(const ExportOptions& opt) {
  if (opt.split != "train" && opt.split != "test" && opt.split != "all")
    throw Error("--split: '" + opt.split + "' is not one of train, test, all");
  if (opt.out_dir.empty()) throw Error("--out: an output directory is required");
  if (opt.config_path.empty()) throw Error("--config: a config file is required");
  const Config config = load_config(opt.config_path, opt.sets);
  // Refuse a directory with files before spending time on the data.
  prepare_png_tree(opt.out_dir);

  set_num_threads(config.train.threads);
  ProgressLine progress;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  progress.update("minivit export: loading " + config.data.path + " (" +
                      std::string(config_name(config.data.format)) + ")",
                  true);
  const DataSplits data = load_data(config.data, config.model);
  std::vector<PngTreeSplit> splits;
  if (opt.split != "test") splits.push_back({"train", &data.train});
  if (opt.split != "train") splits.push_back({"test", &data.test});
  write_png_tree(opt.out_dir, splits, class_folders_for(data.train), config.data.path,
                 [&](const PngTreeProgress& p) {
                   progress.update(strprintf(
                       "minivit export: %s %lld/%lld | %lld/%lld images | %s", p.split.c_str(),
                       (long long)p.split_written, (long long)p.split_images,
                       (long long)p.written, (long long)p.images,
                       format_duration(elapsed()).c_str()));
                 });
  progress.finish();

  std::string counts;
  for (const PngTreeSplit& split : splits)
    counts += (counts.empty() ? "" : " + ") + std::to_string(split.data->size()) + " " + split.name;
  std::printf("minivit export: wrote %s images (%d classes, %dx%d, %d channel%s) to %s in %.1f s\n",
              counts.c_str(), data.train.num_classes, data.train.height(), data.train.width(),
              data.train.channels(), data.train.channels() == 1 ? "" : "s", opt.out_dir.c_str(),
              elapsed());
  return 0;
}

}  // namespace minivit
