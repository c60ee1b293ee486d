// A lock key template: each leading string-literal argument of [[dlock::guard(...)]].
//
//   "order:<id>"              -> fmt "order:{}", placeholder id
//   "user:<this->owner.id>"   -> fmt "user:{}",  placeholder this -> owner . id
//   "a<<b>>{c}"               -> fmt "a<b>{{c}}", no placeholder
//
// `<expr>` is a placeholder: a parameter name or `this`, then any chain of `.member` and
// `->member` (spaces allowed between the parts). `<<` and `>>` stand for a literal `<` and
// `>`; a lone `>` is an error, so the grammar has no ambiguous reading. Escape sequences
// (`\n`, `\x41`, ...) are literal text. Everything is recognised on the literal's spelling,
// so every error points at the exact column inside the literal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/codegen/problem.hpp"

namespace dlock::codegen {

/// How a placeholder reaches a member.
enum class Access { kDot, kArrow };

/// One `.member` or `->member` of a placeholder.
struct MemberStep {
  Access access = Access::kDot;
  std::string name;
  std::size_t offset = 0;       ///< of the `.` or `->`
  std::size_t name_offset = 0;  ///< of the member name
};

/// One `<expr>` of a key template.
struct Placeholder {
  std::string root;  ///< a parameter name or `this`
  std::size_t root_offset = 0;
  std::vector<MemberStep> members;
  std::size_t offset = 0;  ///< of the `<`
  std::size_t length = 0;  ///< up to and including the `>`
};

/// A parsed key: an fmt format string with one `{}` per placeholder.
struct KeyTemplate {
  std::string format;  ///< raw bytes, `{` and `}` of the literal text doubled for fmt
  std::vector<Placeholder> placeholders;
  std::size_t offset = 0;  ///< of the first literal's opening quote
  std::size_t length = 0;  ///< up to and including the last literal's closing quote
};

/// Parses one narrow string literal token, spelled with its quotes, that starts at file
/// offset `offset`, and appends it to `key` (adjacent literals concatenate, as in C++; a
/// placeholder cannot span two of them). Problems are appended to `problems`.
void append_key_literal(std::string_view spelling, std::size_t offset, KeyTemplate& key,
                        std::vector<Problem>& problems);

/// Decodes a plain string literal (`policy="..."`, `name="..."`) to its bytes.
/// Returns false, with a problem, for a prefixed or raw literal.
bool decode_string_literal(std::string_view spelling, std::size_t offset, std::string& bytes,
                           std::vector<Problem>& problems);

/// Spells `bytes` as a C++ narrow string literal: printable ASCII as is, `"` and `\` escaped,
/// control bytes as octal escapes; UTF-8 passes through.
[[nodiscard]] std::string to_string_literal(std::string_view bytes);

/// The key as one literal would spell it, without quotes: `account:<from>` for
/// `"account:" "< from >"`. Two keys with the same text make the same key at run time.
[[nodiscard]] std::string key_text(const KeyTemplate& key);

/// The placeholder as C++: `root` replaced by `root_spelling`, then the member chain.
[[nodiscard]] std::string placeholder_expression(const Placeholder& placeholder,
                                                 std::string_view root_spelling);

}  // namespace dlock::codegen
