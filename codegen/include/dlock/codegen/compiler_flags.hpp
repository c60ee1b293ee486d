// The compiler flags after `--`, as the fast path and clang need them.
//
//   dlock-codegen orders.cpp -o woven.cpp -- -Iinclude -DNDEBUG -std=c++20
//   -fconcepts-diagnostics-depth=3
//
// The flags are whatever the build gives g++. Clang gets the ones it knows (a g++-only flag
// would stop it), its own resource directory and a default standard; the fast path only
// needs the directories that `#include` searches and the forced includes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::codegen {

/// The project's include search, in the order g++ uses it. System directories (-isystem,
/// the compiler's own) are left out on purpose: the fast path does not scan them.
struct SearchPaths {
  std::vector<std::string> quote_dirs;    ///< -iquote: `#include "..."` only
  std::vector<std::string> bracket_dirs;  ///< -I: both forms
  std::vector<std::string> forced_includes;  ///< -include FILE
};

/// Extracts the search paths from compiler flags; relative paths stay relative to the
/// current directory, as for the compiler.
[[nodiscard]] SearchPaths search_paths_from_flags(const std::vector<std::string>& flags);

/// The flags clang is run with: the ones its driver knows (others are dropped), warnings off
/// (only errors matter here), `-x c++`, `-resource-dir` and `-std=gnu++17` (g++ 12's default)
/// unless given.
[[nodiscard]] std::vector<std::string> clang_flags(const std::vector<std::string>& flags,
                                                   std::string_view resource_dir);

}  // namespace dlock::codegen
