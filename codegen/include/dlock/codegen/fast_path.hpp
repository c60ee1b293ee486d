// The fast path: most sources hold no guard, and must cost next to nothing.
//
//   IncludeScan scan = scan_for_guards("/src/util.cpp", text, paths);
//   if (!scan.needs_parse()) { /* write #line 1 + text, no parse */ }
//
// The source and, recursively, the headers it includes from the project (the includer's
// directory, -iquote, -I; not -isystem or the compiler's directories) are raw-lexed (no
// preprocessing, comments ignored) for `dlock::guard` (also `using dlock: guard`). A macro
// `#include NAME` makes the scan inconclusive, and the full parse decides.
//
// A guard in a project header (none in the source) is woven where its function is defined.
// The source skips the parse when it and its project headers can be shown, token by token,
// not to define any function that those guards name: every mention of such a name must be a
// use (`f(x);`, `if (f(x)) {`, `return f(x) && y;`, `obj.f(x)`, ...) or a plain declaration.
// Anything else counts as a possible definition and takes the parse: a qualified or
// unqualified `name(...)` followed by a body, qualifiers or `->`, a parenthesised name, the
// name in a macro, token pasting, braces out of step, a guard on something other than a
// declaration ending in `;` (including `= delete`, `= 0`, an inline definition).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/compiler_flags.hpp"

namespace dlock::codegen {

/// An `#include` the scan followed: file indices into IncludeScan::files.
struct ScannedInclude {
  static constexpr std::size_t kCommandLine = static_cast<std::size_t>(-1);  ///< `-include`
  std::size_t includer = 0;
  std::size_t target = 0;
  ByteRange name;  ///< the header name with its quotes or brackets, in the includer's text
};

/// What the scan found.
struct IncludeScan {
  bool guard_found = false;
  /// False when an include could not be followed (`#include MACRO`).
  bool conclusive = true;
  /// The guards found are all in project headers, on declarations of functions that no
  /// scanned file can define: there is nothing to weave.
  bool only_used = false;
  /// The source and every project header scanned: the depfile of a fast-path run.
  std::vector<std::string> files;
  /// The scanned files that mention a guard.
  std::vector<std::string> guard_files;
  /// The text of each scanned file, and the includes followed.
  std::vector<std::string> texts;
  std::vector<ScannedInclude> includes;
  /// When the source has no guard and every guard on a declaration is only used: the
  /// headers (indices into `files`) whose guards are on definitions. Those are woven into
  /// copies by a parse; a source that only includes them can use copies another source's
  /// parse made (header_cache.hpp), and otherwise needs a parse of its own.
  std::vector<std::size_t> defining_headers;

  /// False when the source can be copied through without a parse.
  [[nodiscard]] bool needs_parse() const { return !conclusive || (guard_found && !only_used); }
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
