#include "dlock/codegen/attribute_lexer.hpp"

#include <clang/Basic/LangOptions.h>
#include <clang/Basic/SourceLocation.h>
#include <clang/Lex/Lexer.h>
#include <clang/Lex/Token.h>

#include <string>
#include <variant>

namespace dlock::codegen {
namespace {

// A raw lexer over a buffer, reporting tokens by byte offset. Raw lexing needs no
// preprocessor: comments are skipped and identifiers (keywords too) are raw_identifier.
class RawLexer {
 public:
  RawLexer(std::string_view buffer, std::size_t start, const clang::LangOptions& lang)
      : buffer_(buffer),
        lexer_(clang::SourceLocation(), lang, buffer.data(), buffer.data() + start,
               buffer.data() + buffer.size()) {}

  clang::Token next() {
    clang::Token token;
    lexer_.LexFromRawLexer(token);
    return token;
  }

  std::size_t offset(const clang::Token& token) const {
    return token.getLocation().getRawEncoding() - clang::SourceLocation().getRawEncoding();
  }

  std::size_t end(const clang::Token& token) const { return offset(token) + token.getLength(); }

  std::string_view spelling(const clang::Token& token) const {
    return buffer_.substr(offset(token), token.getLength());
  }

 private:
  std::string_view buffer_;
  clang::Lexer lexer_;
};

bool is_string(clang::tok::TokenKind kind) {
  return kind == clang::tok::string_literal || kind == clang::tok::wide_string_literal ||
         kind == clang::tok::utf8_string_literal || kind == clang::tok::utf16_string_literal ||
         kind == clang::tok::utf32_string_literal;
}

TokenKind classify(clang::tok::TokenKind kind) {
  if (kind == clang::tok::raw_identifier) return TokenKind::kIdentifier;
  if (is_string(kind)) return TokenKind::kString;
  if (kind == clang::tok::numeric_constant) return TokenKind::kNumber;
  if (kind == clang::tok::comma) return TokenKind::kComma;
  if (kind == clang::tok::equal) return TokenKind::kEqual;
  if (kind == clang::tok::l_paren || kind == clang::tok::l_square || kind == clang::tok::l_brace) {
    return TokenKind::kOpen;
  }
  if (kind == clang::tok::r_paren || kind == clang::tok::r_square || kind == clang::tok::r_brace) {
    return TokenKind::kClose;
  }
  return TokenKind::kOther;
}

clang::tok::TokenKind closer_of(clang::tok::TokenKind open) {
  if (open == clang::tok::l_paren) return clang::tok::r_paren;
  if (open == clang::tok::l_square) return clang::tok::r_square;
  return clang::tok::r_brace;
}

// Lexes a balanced clause whose opening bracket was just read; appends the tokens inside it
// to `tokens` (when given). Returns the closing token's offset, or a problem.
std::variant<std::size_t, Problem> lex_balanced(RawLexer& lexer, const clang::Token& open,
                                                std::vector<ArgToken>* tokens) {
  std::vector<clang::tok::TokenKind> expected{closer_of(open.getKind())};
  while (true) {
    const clang::Token token = lexer.next();
    const clang::tok::TokenKind kind = token.getKind();
    if (kind == clang::tok::eof) {
      return Problem{lexer.offset(open), 1, "unterminated argument list of 'dlock::guard'", {}, {}};
    }
    if (token.needsCleaning() && kind != clang::tok::unknown) {
      // A backslash-newline inside a token: its offsets no longer match its text.
      return Problem{lexer.offset(token), token.getLength(),
                     "line continuations are not supported inside 'dlock::guard'", {}, {}};
    }
    const TokenKind ours = classify(kind);
    if (ours == TokenKind::kClose) {
      if (kind != expected.back()) {
        return Problem{lexer.offset(token), 1,
                       "unbalanced '" + std::string(lexer.spelling(token)) + "' in 'dlock::guard'",
                       {}, {}};
      }
      expected.pop_back();
      if (expected.empty()) return lexer.offset(token);
    } else if (ours == TokenKind::kOpen) {
      expected.push_back(closer_of(kind));
    }
    if (tokens) tokens->push_back({ours, std::string(lexer.spelling(token)), lexer.offset(token)});
  }
}

// One attribute of an attribute-specifier `[[ ... ]]`.
struct ListedAttribute {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t name_offset = 0;  ///< the attribute's own name (after `ns::`)
};

struct Specifier {
  std::size_t begin = 0;  ///< the first `[`
  std::size_t end = 0;    ///< after the last `]`
  std::vector<ListedAttribute> attributes;
};

// Parses `[[ [using ns:] attr, attr(...), ... ]]` starting at `begin`; nullopt if the text
// there is not one.
std::optional<Specifier> parse_specifier(std::string_view buffer, std::size_t begin,
                                         const clang::LangOptions& lang) {
  RawLexer lexer(buffer, begin, lang);
  if (!lexer.next().is(clang::tok::l_square) || !lexer.next().is(clang::tok::l_square)) {
    return std::nullopt;
  }
  Specifier specifier;
  specifier.begin = begin;
  clang::Token token = lexer.next();
  if (token.is(clang::tok::raw_identifier) && token.getRawIdentifier() == "using") {
    if (!lexer.next().is(clang::tok::raw_identifier) || !lexer.next().is(clang::tok::colon)) {
      return std::nullopt;
    }
    token = lexer.next();
  }
  while (true) {
    if (token.is(clang::tok::r_square)) {
      const clang::Token second = lexer.next();
      if (!second.is(clang::tok::r_square)) return std::nullopt;
      specifier.end = lexer.end(second);
      return specifier;
    }
    if (token.is(clang::tok::comma)) {  // an empty attribute: `[[, nodiscard]]` is valid
      token = lexer.next();
      continue;
    }
    if (!token.is(clang::tok::raw_identifier)) return std::nullopt;
    ListedAttribute attribute;
    attribute.begin = lexer.offset(token);
    attribute.name_offset = lexer.offset(token);
    attribute.end = lexer.end(token);
    token = lexer.next();
    if (token.is(clang::tok::coloncolon)) {
      token = lexer.next();
      if (!token.is(clang::tok::raw_identifier)) return std::nullopt;
      attribute.name_offset = lexer.offset(token);
      attribute.end = lexer.end(token);
      token = lexer.next();
    }
    if (token.is(clang::tok::l_paren)) {
      const auto close = lex_balanced(lexer, token, nullptr);
      if (!std::holds_alternative<std::size_t>(close)) return std::nullopt;
      attribute.end = std::get<std::size_t>(close) + 1;
      token = lexer.next();
    }
    if (token.is(clang::tok::ellipsis)) {
      attribute.end = lexer.end(token);
      token = lexer.next();
    }
    specifier.attributes.push_back(attribute);
    if (token.is(clang::tok::comma)) {
      token = lexer.next();
    } else if (!token.is(clang::tok::r_square)) {
      return std::nullopt;
    }
  }
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// The guard alone when it shares its `[[...]]`, else the whole specifier.
std::optional<ByteRange> removal_in(const Specifier& specifier, std::size_t name_offset) {
  const auto& attributes = specifier.attributes;
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    if (attributes[i].name_offset != name_offset) continue;
    if (attributes.size() == 1) return ByteRange{specifier.begin, specifier.end};
    if (i > 0) return ByteRange{attributes[i - 1].end, attributes[i].end};  // ", guard(...)"
    return ByteRange{attributes[i].begin, attributes[i + 1].begin};        // "guard(...), "
  }
  return std::nullopt;
}

// Looks backwards from the attribute for the `[[` that opens it. A candidate `[` that turns
// out not to open a specifier holding this attribute (an array subscript, a `[[` inside
// another attribute's argument) is passed over.
std::optional<ByteRange> find_removal(std::string_view buffer, std::size_t scope_offset,
                                      std::size_t name_offset, const clang::LangOptions& lang) {
  constexpr int kMaxCandidates = 64;
  std::size_t position = scope_offset;
  for (int candidates = 0; candidates < kMaxCandidates && position > 0;) {
    position = buffer.rfind('[', position - 1);
    if (position == std::string_view::npos) break;
    std::size_t next = position + 1;
    while (next < buffer.size() && is_space(buffer[next])) ++next;
    if (next >= buffer.size() || buffer[next] != '[') continue;
    ++candidates;
    if (auto specifier = parse_specifier(buffer, position, lang)) {
      if (auto removal = removal_in(*specifier, name_offset)) return removal;
    }
  }
  return std::nullopt;
}

}  // namespace

AttributeRead read_attribute(std::string_view buffer, std::size_t scope_offset,
                             std::size_t name_offset, const clang::LangOptions& lang) {
  AttributeRead result;
  if (name_offset >= buffer.size() || scope_offset > name_offset) {
    result.problem = Problem{scope_offset, 0, "cannot read this 'dlock::guard'", {}, {}};
    return result;
  }
  RawLexer lexer(buffer, name_offset, lang);
  const clang::Token name = lexer.next();
  if (!name.is(clang::tok::raw_identifier) || name.getRawIdentifier() != "guard") {
    result.problem = Problem{scope_offset, 0, "cannot read this 'dlock::guard'", {}, {}};
    return result;
  }
  const clang::Token open = lexer.next();
  if (!open.is(clang::tok::l_paren)) {
    result.problem = Problem{lexer.end(name), 0,
                             "'dlock::guard' needs a lock key, e.g. "
                             "[[dlock::guard(\"order:<id>\")]]",
                             "(\"key\")", {}};
    return result;
  }
  AttributeSyntax syntax;
  syntax.open_paren = lexer.offset(open);
  auto close = lex_balanced(lexer, open, &syntax.arguments);
  if (auto* problem = std::get_if<Problem>(&close)) {
    result.problem = std::move(*problem);
    return result;
  }
  syntax.close_paren = std::get<std::size_t>(close);
  auto removal = find_removal(buffer, scope_offset, name_offset, lang);
  if (!removal) {
    result.problem =
        Problem{scope_offset, 0, "cannot find the '[[' that opens this 'dlock::guard'", {}, {}};
    return result;
  }
  syntax.removal = *removal;
  result.syntax = std::move(syntax);
  return result;
}

const clang::LangOptions& raw_lexing_options() {
  static const clang::LangOptions kOptions = [] {
    clang::LangOptions lang;
    lang.CPlusPlus = lang.CPlusPlus11 = lang.CPlusPlus14 = lang.CPlusPlus17 = 1;
    lang.CPlusPlus20 = 1;
    return lang;
  }();
  return kOptions;
}

std::vector<ArgToken> lex_arguments(std::string_view text) {
  // Wrapped in parentheses so that the balanced lexing is the same as for a real attribute.
  const std::string buffer = "(" + std::string(text) + ")";
  RawLexer lexer(std::string_view(buffer.c_str(), buffer.size()), 0, raw_lexing_options());
  const clang::Token open = lexer.next();
  std::vector<ArgToken> tokens;
  (void)lex_balanced(lexer, open, &tokens);
  for (ArgToken& token : tokens) token.offset -= 1;
  // A literal left open at the end of `text` runs into the ')' added above; only the last
  // token can, and it keeps just its part of `text`.
  if (!tokens.empty() && tokens.back().offset + tokens.back().text.size() > text.size()) {
    tokens.back().text.resize(text.size() - tokens.back().offset);
  }
  return tokens;
}

}  // namespace dlock::codegen
