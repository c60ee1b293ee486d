// A located error in a guard, before it becomes a clang diagnostic.
//
//   Problem p{.offset = 412, .length = 3,
//             .message = "unknown parameter 'idd' in lock key; did you mean 'id'?",
//             .fix = "id"};
//
// The parts of the generator that work on text (the attribute grammar, key templates) report
// byte offsets into the file that holds the attribute; the checker turns them into clang
// diagnostics with a caret, a fix-it and notes, so they print exactly like clang's own.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace dlock::codegen {

/// A `note:` attached to a problem, e.g. where a duplicate option was first given.
struct Note {
  std::size_t offset = 0;
  std::string message;
};

/// One error in a guard.
struct Problem {
  std::size_t offset = 0;  ///< where the caret goes
  std::size_t length = 0;  ///< bytes underlined from `offset`; 0 for a caret only
  std::string message;
  /// A fix-it: the text that should replace [offset, offset + length).
  std::optional<std::string> fix;
  std::vector<Note> notes;
};

}  // namespace dlock::codegen
