// The fast path: most sources hold no guard, and must cost next to nothing.
//
//   IncludeScan scan = scan_for_guards("/src/util.cpp", text, paths);
//   if (scan.conclusive && !scan.guard_found) { /* write #line 1 + text, no parse */ }
//
// The source and, recursively, the headers it includes from the project (the includer's
// directory, -iquote, -I; not -isystem or the compiler's directories) are raw-lexed (no
// preprocessing, comments ignored) for `dlock::guard` (also `using dlock: guard`). A macro
// `#include NAME` makes the scan inconclusive, and the full parse decides.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/codegen/compiler_flags.hpp"

namespace dlock::codegen {

/// What the scan found.
struct IncludeScan {
  bool guard_found = false;
  /// False when an include could not be followed (`#include MACRO`).
  bool conclusive = true;
  /// The source and every project header scanned: the depfile of a fast-path run.
  std::vector<std::string> files;
};

/// One mention of `dlock::guard` in a file's text.
struct GuardMention {
  std::size_t offset = 0;     ///< of the `guard` identifier
  bool in_directive = false;  ///< on a preprocessor line: `#define`, `#if __has_cpp_attribute`
};

/// Every mention of `dlock::guard` in `text` outside comments and string literals.
[[nodiscard]] std::vector<GuardMention> find_guard_mentions(std::string_view text);

/// True when `text` mentions `dlock::guard` outside comments.
[[nodiscard]] bool mentions_guard(std::string_view text);

/// Scans `source_path` (whose text is `source_text`) and the project headers it includes.
[[nodiscard]] IncludeScan scan_for_guards(const std::string& source_path,
                                          std::string_view source_text,
                                          const SearchPaths& paths);

}  // namespace dlock::codegen
