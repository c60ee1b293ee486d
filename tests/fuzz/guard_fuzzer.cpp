// Fuzz target: the generator's reading of [[dlock::guard(...)]] without an AST: the raw
// lexing of the argument clause (attribute_lexer), the argument grammar (guard_parser), key
// templates and string literals (key_template) and durations (duration).
//
// The input is the text between the attribute's parentheses. It is read three ways: as an
// argument clause (lex_arguments), inside a whole attribute in a file (read_attribute), and
// as the inside of one string literal (append_key_literal, decode_string_literal). Problems
// are the only acceptable way to refuse it, and each must point inside the text it is about;
// an accepted key must be an fmt format string with one field per placeholder, because the
// woven code passes it to fmt::format.
#include <fmt/args.h>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/guard_parser.hpp"
#include "dlock/codegen/key_template.hpp"
#include "fuzz_check.hpp"

namespace codegen = dlock::codegen;

namespace {

// [begin, end) of the text a problem may point into; a zero-length caret may sit at `end`.
void check_problems(const std::vector<codegen::Problem>& problems, std::size_t begin,
                    std::size_t end) {
  for (const codegen::Problem& p : problems) {
    DLOCK_FUZZ_CHECK(!p.message.empty(), "problem without a message at {}", p.offset);
    DLOCK_FUZZ_CHECK(p.offset >= begin && p.offset <= end && p.length <= end - p.offset + 1,
                     "problem [{}, +{}) outside [{}, {}]: {}", p.offset, p.length, begin, end,
                     p.message);
    for (const codegen::Note& note : p.notes) {
      DLOCK_FUZZ_CHECK(note.offset >= begin && note.offset <= end, "note at {} outside [{}, {}]",
                       note.offset, begin, end);
    }
  }
}

// What the woven code does with an accepted key: fmt::format(format, one value per field).
void check_key(const codegen::KeyTemplate& key, std::size_t begin, std::size_t end) {
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  fmt::dynamic_format_arg_store<fmt::format_context> one_short;
  for (const codegen::Placeholder& p : key.placeholders) {
    DLOCK_FUZZ_CHECK(!p.root.empty() && p.offset >= begin && p.offset + p.length <= end,
                     "placeholder '{}' at [{}, +{}) outside [{}, {})", p.root, p.offset, p.length,
                     begin, end);
    for (const codegen::MemberStep& step : p.members) {
      DLOCK_FUZZ_CHECK(!step.name.empty(), "empty member of '{}'", p.root);
    }
    (void)codegen::placeholder_expression(p, "x");
    if (&p != &key.placeholders.front()) one_short.push_back(p.root);
    args.push_back(p.root);
  }
  try {
    (void)fmt::vformat(key.format, args);
  } catch (const fmt::format_error& error) {
    DLOCK_FUZZ_CHECK(false, "key format '{}' with {} values: {}", key.format,
                     key.placeholders.size(), error.what());
  }
  if (!key.placeholders.empty()) {
    bool refused = false;
    try {
      (void)fmt::vformat(key.format, one_short);
    } catch (const fmt::format_error&) {
      refused = true;
    }
    DLOCK_FUZZ_CHECK(refused, "key format '{}' has fewer fields than its {} placeholders",
                     key.format, key.placeholders.size());
  }
  // The woven file spells the format as a literal; it must read back as the same bytes.
  std::string bytes;
  std::vector<codegen::Problem> problems;
  const bool decoded =
      codegen::decode_string_literal(codegen::to_string_literal(key.format), 0, bytes, problems);
  DLOCK_FUZZ_CHECK(decoded && problems.empty() && bytes == key.format,
                   "to_string_literal does not round-trip '{}'", key.format);
}

void check_parse(const codegen::GuardParse& parse, std::size_t begin, std::size_t end) {
  check_problems(parse.problems, begin, end);
  if (!parse.problems.empty()) return;
  DLOCK_FUZZ_CHECK(!parse.spec.keys.empty(), "no key and no problem");
  for (const codegen::KeyTemplate& key : parse.spec.keys) check_key(key, begin, end);
  const codegen::LockOptions& o = parse.spec.options;
  if (o.lease) DLOCK_FUZZ_CHECK(o.lease->count() > 0, "lease {}", o.lease->count());
  if (o.max_hold) DLOCK_FUZZ_CHECK(o.max_hold->count() > 0, "max_hold {}", o.max_hold->count());
  if (o.min_hold && o.max_hold) {
    DLOCK_FUZZ_CHECK(*o.min_hold <= *o.max_hold, "min_hold above max_hold");
  }
  if (o.permits) {
    DLOCK_FUZZ_CHECK(*o.permits >= 1 && *o.permits <= dlock::kMaxPermits, "permits {}", *o.permits);
    DLOCK_FUZZ_CHECK(o.mode != dlock::LockMode::kShared, "permits with mode=shared");
  }
  if (parse.spec.policy) DLOCK_FUZZ_CHECK(!parse.spec.policy->empty(), "empty policy");
  if (parse.spec.name) DLOCK_FUZZ_CHECK(!parse.spec.name->empty(), "empty name");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // 1. The argument clause alone; offsets are relative to `text`, the ')' is at its end.
  const std::vector<codegen::ArgToken> tokens = codegen::lex_arguments(text);
  for (const codegen::ArgToken& token : tokens) {
    DLOCK_FUZZ_CHECK(token.offset <= size && token.text.size() <= size - token.offset &&
                         text.substr(token.offset, token.text.size()) == token.text,
                     "token '{}' at {} is not the text there", token.text, token.offset);
  }
  check_parse(codegen::parse_guard_arguments(tokens, size), 0, size);

  // 2. The same text inside an attribute in a file, as the generator reads it.
  const std::string prefix = "[[nodiscard, dlock::guard(";
  const std::string buffer = prefix + std::string(text) + ")]] int f(long id);\n";
  const std::size_t scope = prefix.find("dlock");
  const codegen::AttributeRead read = codegen::read_attribute(
      std::string_view(buffer.c_str(), buffer.size()), scope, scope + 7,
      codegen::raw_lexing_options());
  DLOCK_FUZZ_CHECK(read.syntax.has_value() != read.problem.has_value(),
                   "read_attribute gave {} syntax and {} problem", read.syntax.has_value(),
                   read.problem.has_value());
  if (read.problem) check_problems({*read.problem}, 0, buffer.size());
  if (read.syntax) {
    const codegen::AttributeSyntax& s = *read.syntax;
    DLOCK_FUZZ_CHECK(s.open_paren < s.close_paren && s.close_paren < buffer.size() &&
                         buffer[s.open_paren] == '(' && buffer[s.close_paren] == ')',
                     "parentheses at {} and {}", s.open_paren, s.close_paren);
    DLOCK_FUZZ_CHECK(s.removal.begin <= scope && s.close_paren < s.removal.end &&
                         s.removal.end <= buffer.size(),
                     "removal [{}, {}) does not cover the guard", s.removal.begin, s.removal.end);
    check_parse(codegen::parse_guard_arguments(s.arguments, s.close_paren), s.open_paren + 1,
                s.close_paren);
  }

  // 3. The text as the inside of one string literal, whatever it holds.
  const std::string literal = "\"" + std::string(text) + "\"";
  codegen::KeyTemplate key;
  std::vector<codegen::Problem> problems;
  codegen::append_key_literal(literal, 0, key, problems);
  check_problems(problems, 0, literal.size());
  if (problems.empty()) check_key(key, 0, literal.size());
  std::string bytes;
  problems.clear();
  const bool decoded = codegen::decode_string_literal(literal, 0, bytes, problems);
  DLOCK_FUZZ_CHECK(decoded == problems.empty(), "decode_string_literal: {} with {} problems",
                   decoded, problems.size());
  check_problems(problems, 0, literal.size());
  return 0;
}
