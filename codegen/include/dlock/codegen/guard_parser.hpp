// The grammar of [[dlock::guard(...)]]'s arguments (DESIGN.md §1), on tokens.
//
//   GuardParse p = parse_guard_arguments(lex_arguments(R"("order:<id>", lease=30s)"), 24);
//   p.spec.lease == Millis{30000}; p.problems.empty();
//
// clang hands the generator the attribute without its arguments, so they are read back from
// the source with clang's raw lexer (attribute_lexer.hpp) and parsed here: pure, no AST.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dlock/codegen/guard_spec.hpp"
#include "dlock/codegen/problem.hpp"

namespace dlock::codegen {

/// The token kinds the grammar distinguishes.
enum class TokenKind { kIdentifier, kString, kNumber, kComma, kEqual, kOpen, kClose, kOther };

/// One token of the argument clause, with its spelling and its byte offset in the file.
struct ArgToken {
  TokenKind kind = TokenKind::kOther;
  std::string text;
  std::size_t offset = 0;
};

/// A guard spec and every problem found; the spec is only meaningful without problems.
struct GuardParse {
  GuardSpec spec;
  std::vector<Problem> problems;
};

/// The option names, in the order `--help` and messages list them.
[[nodiscard]] const std::vector<std::string>& option_names();

/// Parses the tokens between the attribute's parentheses; `close_offset` is where the `)`
/// is, for "missing key" problems.
[[nodiscard]] GuardParse parse_guard_arguments(const std::vector<ArgToken>& tokens,
                                               std::size_t close_offset);

}  // namespace dlock::codegen
