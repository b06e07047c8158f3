#pragma once
// For minivit's own program, beside the C API (minivit.h): what a handle holds that the C
// description leaves out. Not installed.
#include "minivit.h"
#include "minivit/core/config.h"

namespace minivit {

// The resolved config of the checkpoint the handle holds; throws minivit::Error when none.
const Config& loaded_config(const minivit_model* model);

}  // namespace minivit
