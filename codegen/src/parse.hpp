// The clang side of a run, as the driver sees it: parse the source with the build's flags,
// check and weave its guards (weave_action), and say what was read and written.
//
//   WeaveOutcome outcome = parse_and_weave(source, clang_flags(flags, resource_dir), places);
//   if (outcome.woven) { write(outcome.headers); write(*outcome.woven); }
//
// Kept apart from weave_action.hpp so that the driver compiles without clang's Frontend and
// Tooling headers.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dlock::codegen {

/// A woven copy of a project header that defines guarded functions (or includes one that
/// does): written to `path`, and every `#include` of the original in the woven files points
/// there instead.
struct WovenHeader {
  std::string path;
  std::string text;
  bool shared = false;  ///< under a key in the shared directory: never rewritten once there
};

/// What a run produced.
struct WeaveOutcome {
  /// Set only when clang and every guard check passed.
  std::optional<std::string> woven;
  /// Copies of headers, to write before `woven`.
  std::vector<WovenHeader> headers;
  /// Every file the translation unit read, absolute, the source first.
  std::vector<std::string> dependencies;
  /// Clang itself found errors in the source (not only the guard checks).
  bool clang_errors = true;
};

/// Where woven copies of headers go: under `header_dir`, or by their keys under `shared_dir`
/// (if not empty) when they can be shared; `context` is generator_context() of the flags.
struct WeavePlaces {
  std::string header_dir;
  std::string shared_dir;
  std::string context;
};

/// Parses `source` with clang, run as for any clang tool over a fixed compilation database of
/// `flags` (already mapped by clang_flags()), and weaves it. Clang's diagnostics go to stderr.
[[nodiscard]] WeaveOutcome parse_and_weave(const std::string& source,
                                           std::vector<std::string> flags, WeavePlaces places);

}  // namespace dlock::codegen
