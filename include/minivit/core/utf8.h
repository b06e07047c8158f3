#pragma once
// Text that minivit stores (config.toml, checkpoint metadata, class names) must be UTF-8:
// TOML and JSON require it, and a byte that is not would come back as another string than
// the one the run used. Inputs from outside (command-line overrides, class folder names,
// CIFAR name files) are checked when they are read, so a run fails at once, naming the
// input, rather than at its first checkpoint.
#include <string_view>

namespace minivit {

// Well-formed UTF-8: no stray continuation bytes, overlong forms, surrogates, or code
// points beyond U+10FFFF.
bool is_valid_utf8(std::string_view text);

}  // namespace minivit
