#include "minivit/train/resume_history.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "minivit/core/fileio.h"
#include "minivit/formats/config_file.h"

namespace minivit {

std::string metrics_up_to(const std::string& path, int64_t step, std::vector<EpochPoint>& epochs) {
  std::string kept;
  if (!file_exists(path)) return kept;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step")) continue;
    if (j["step"].get<int64_t>() > step) continue;
    if (j.value("type", "") == "epoch") {
      auto num = [&](const char* k) {
        return j.contains(k) && j[k].is_number() ? j[k].get<double>() : NAN;
      };
      epochs.push_back({j["epoch"].get<int>(), num("train_loss"), num("train_acc"),
                        num("val_loss"), num("val_acc")});
    }
    kept += line + "\n";
  }
  return kept;
}

void warn_about_changed_keys(const Config& started_with, const Config& now) {
  const auto before = config_to_flat(started_with), after = config_to_flat(now);
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    const std::string& key = before[i].first;
    // Keys that change no weight: where the run writes, how often it logs, and the thread
    // count (every product and reduction is cut the same whatever the threads).
    if (key == "train.out_dir" || key == "train.log_every" || key == "train.threads") continue;
    if (before[i].second != after[i].second)
      std::fprintf(stderr, "note: resuming with %s = %s; the run was started with %s = %s, so it "
                           "will not match an uninterrupted run\n",
                   key.c_str(), after[i].second.c_str(), key.c_str(), before[i].second.c_str());
  }
}

}  // namespace minivit
