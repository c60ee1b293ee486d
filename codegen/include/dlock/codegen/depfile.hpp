// Make-syntax depfiles, which Ninja and Make read to re-run the generator when the source
// or anything it includes changes.
//
//   make_depfile("woven/orders.cpp", {"/src/orders.cpp", "/src/my header.h"});
//   // "woven/orders.cpp: \\\n  /src/orders.cpp \\\n  /src/my\\ header.h\n"
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::codegen {

/// A path escaped for a Make rule: spaces and `#` backslash-escaped, `$` doubled.
[[nodiscard]] std::string escape_make_path(std::string_view path);

/// `target: dep1 dep2 ...`, one dependency per line.
[[nodiscard]] std::string make_depfile(std::string_view target,
                                       const std::vector<std::string>& dependencies);

}  // namespace dlock::codegen
