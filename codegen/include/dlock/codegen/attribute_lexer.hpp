// Reads a [[dlock::guard(...)]] back from the source with clang's raw lexer.
//
//   AttributeRead r = read_attribute(buffer, scope_offset, name_offset, lang);
//   r.syntax->arguments;  // tokens between the parentheses
//   r.syntax->removal;    // what to cut so that only the other attributes remain
//
// clang tells the generator where `dlock` and `guard` are but drops the arguments; this
// lexes forward from `guard` for a balanced argument clause, and finds the enclosing
// `[[ ... ]]` so that the guard alone can be removed from the woven file.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "dlock/codegen/guard_parser.hpp"
#include "dlock/codegen/problem.hpp"

namespace clang {
class LangOptions;
}

namespace dlock::codegen {

/// A byte range [begin, end) in a file.
struct ByteRange {
  std::size_t begin = 0;
  std::size_t end = 0;
};

/// Where a guard attribute is and what it holds.
struct AttributeSyntax {
  std::vector<ArgToken> arguments;  ///< between the parentheses
  std::size_t open_paren = 0;
  std::size_t close_paren = 0;
  /// The guard and its comma when it shares `[[...]]` with other attributes, else the whole
  /// `[[...]]`.
  ByteRange removal;
};

/// The attribute, or the problem that stops it from being read.
struct AttributeRead {
  std::optional<AttributeSyntax> syntax;
  std::optional<Problem> problem;
};

/// `buffer` is the whole file and must be followed by a NUL (clang's buffers are);
/// `scope_offset` is where `dlock` is and `name_offset` where `guard` is.
[[nodiscard]] AttributeRead read_attribute(std::string_view buffer, std::size_t scope_offset,
                                           std::size_t name_offset,
                                           const clang::LangOptions& lang);

/// The language raw lexing assumes where no parse supplies one: C++20, so that `::` is a
/// token and raw strings are recognised.
[[nodiscard]] const clang::LangOptions& raw_lexing_options();

/// Lexes `text` as the inside of an argument clause; offsets are relative to `text`.
/// For tests of the grammar.
[[nodiscard]] std::vector<ArgToken> lex_arguments(std::string_view text);

}  // namespace dlock::codegen
