// Turns a source file and its checked guards into the woven file.
//
//   [[dlock::guard("order:<id>", lease=30s)]]
//   Receipt place_order(long id, const Cart& cart) {
//
// becomes (prelude first, then the original text with two edits):
//
//   #include <dlock/guard.hpp>
//   #include <fmt/core.h>
//   #line 1 "/src/orders.cpp"
//   ...
//
//   Receipt place_order(long id, const Cart& cart) {
//   #line 12 "/src/orders.cpp"
//   static const ::dlock::GuardSite dlock_guard_site_{...}; ::dlock::Guard dlock_guard_(...);
//   #line 13 "/src/orders.cpp"
//
// The `#line` directives keep every original line at its number and put the guard code on
// the attribute's line, so that an error in it (a key value fmt cannot format) points there.
// Edits are collected as clang::tooling::Replacements; everything else is byte for byte.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/guard_spec.hpp"

namespace dlock::codegen {

/// What a skipped call returns; kNone when the return type does not allow skipping.
enum class SkipReturn { kNone, kVoid, kBool, kOptional };

/// A file and line as `#line` should name them.
struct LinePosition {
  std::string file;
  unsigned line = 0;
};

/// One lock key as the guard code formats it.
struct KeyCode {
  std::string format;                  ///< fmt format string, bytes
  std::vector<std::string> arguments;  ///< C++ expressions, one per `{}`
};

/// Everything the guard code at the top of one body needs.
struct GuardCode {
  std::string name;    ///< the guard's name, bytes
  std::string policy;  ///< bytes; empty for none
  LockOptions options;
  /// In the order written; with more than one, the Guard gets them all (the runtime sorts).
  std::vector<KeyCode> keys;
  SkipReturn skip = SkipReturn::kNone;
  LinePosition attribute;  ///< where the attribute is written
};

/// One guarded function. Its body may be in the source or in a header (woven as a copy);
/// the attribute is removed only from the file it is written in, and only when that file
/// is woven anyway (the source, or the header that holds the body).
struct WeaveEdit {
  std::optional<ByteRange> removal;  ///< the attribute, when it is removed
  std::string attribute_file;        ///< absolute path of the attribute's file; empty: any
  std::size_t body_offset = 0;       ///< just after the `{` of the body
  std::string body_file;             ///< absolute path of the body's file; empty: any
  LinePosition brace;                ///< where that `{` is
  GuardCode code;
};

/// Bytes of a file replaced by other text (an `#include`'s file name pointed elsewhere).
struct TextEdit {
  ByteRange range;
  std::string text;
};

/// The woven text, or why the edits could not be applied.
struct WeaveResult {
  std::string text;
  std::string error;
};

/// `#line N "file"` with the file spelled as a string literal.
[[nodiscard]] std::string line_directive(unsigned line, std::string_view file);

/// The guard code for one body, on one line, without a newline.
[[nodiscard]] std::string render_guard_code(const GuardCode& code);

/// The woven file. `path` is the absolute original path for `#line 1`; of `edits`, only the
/// parts whose file is `path` (or empty) apply. `prelude` puts the runtime's includes first
/// (for a source; a woven header relies on its source's).
[[nodiscard]] WeaveResult weave_source(std::string_view source, std::string_view path,
                                       const std::vector<WeaveEdit>& edits,
                                       const std::vector<TextEdit>& rewrites = {},
                                       bool prelude = true);

/// The output for a source without guards: `#line 1 "path"` and the original text.
[[nodiscard]] std::string passthrough_source(std::string_view source, std::string_view path);

}  // namespace dlock::codegen
