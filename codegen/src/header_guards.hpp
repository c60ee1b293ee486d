// Header guards that a source only uses. A guard on a declaration in a header is woven where
// the function is defined; a source that includes such a header but defines none of the
// guarded functions has nothing to weave, so it can skip the parse (fast_path.cpp asks).
#pragma once

#include <clang/Basic/LangOptions.h>

#include <cstddef>
#include <string>
#include <vector>

#include "dlock/codegen/fast_path.hpp"

namespace dlock::codegen {

/// Raw lexing as the fast path does it (digraphs on, as g++ has them).
const clang::LangOptions& token_lexing_options();

// What the guards of the project headers ask of a source with no guard of its own.
struct HeaderGuards {
  /// Every guard on a plain declaration names functions that no scanned file may define.
  bool declarations_only_used = true;
  /// The files (indices into the texts) with guards that are not plain declarations: on
  /// definitions, which a parse of some source weaves into a copy of the header.
  std::vector<std::size_t> defining;
};

/// `texts` holds each scanned file, the source first (which mentions no guard here), and
/// `mentions` the guards each mentions.
[[nodiscard]] HeaderGuards classify_header_guards(
    const std::vector<std::string>& texts, const std::vector<std::vector<GuardMention>>& mentions);

}  // namespace dlock::codegen
