#pragma once
// What a resumed run (train --resume) takes from the run it continues, beside the resume
// state itself: the lines of metrics.jsonl up to the resumed step, and a note for each
// config key that changed since the run was started.
#include <cstdint>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/inspect/plot.h"

namespace minivit {

// Lines of metrics.jsonl that belong to steps up to `step` (a resumed run rewrites the
// rest), with the epoch points among them appended to `epochs`. Lines that do not parse (a
// crash mid-append) are dropped.
std::string metrics_up_to(const std::string& path, int64_t step, std::vector<EpochPoint>& epochs);

// A resumed run matches an uninterrupted one only under the config it was started with;
// a changed key (more epochs, another learning rate) is allowed, but said on stderr, as the
// continuation then takes another path. Keys that change no weight (the run directory, the
// logging cadence, the thread count) are left out.
void warn_about_changed_keys(const Config& started_with, const Config& now);

}  // namespace minivit
