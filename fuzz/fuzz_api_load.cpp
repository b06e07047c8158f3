// libFuzzer target: see fuzz_entry.h for how the input reaches the C API.
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return minivit_fuzz::fuzz_one(minivit_fuzz::run_api_load, data, size);
}
