#include "header_guards.hpp"

#include <clang/Basic/SourceLocation.h>
#include <clang/Lex/Lexer.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string_view>

#include "dlock/codegen/attribute_lexer.hpp"

namespace dlock::codegen {
namespace {

// --- Header guards that a source only uses --------------------------------------------------
//
// A guard on a declaration in a header is woven where the function is defined. A source that
// includes such a header but defines none of the guarded functions has nothing to weave, so it
// can skip the parse. The check below is deliberately one-sided: it must never call a
// definition a use (that would drop a lock without a word); calling a use a possible
// definition only costs a parse. Every case it does not recognise is a possible definition.

// One raw token of a file, with what the checks need.
struct Tok {
  clang::tok::TokenKind kind = clang::tok::unknown;
  std::string_view identifier;  // raw identifiers (keywords included), else empty
  std::size_t offset = 0;
  bool in_directive = false;
  bool dirty = false;  // spelled with a `\`-newline or a universal character name
};


// `text` must be followed by a NUL, as std::string's data is.
std::vector<Tok> lex_tokens(std::string_view text) {
  clang::Lexer lexer(clang::SourceLocation(), token_lexing_options(), text.data(), text.data(),
                     text.data() + text.size());
  std::vector<Tok> tokens;
  bool in_directive = false;
  clang::Token token;
  while (true) {
    lexer.LexFromRawLexer(token);
    if (token.is(clang::tok::eof)) break;
    if (token.isAtStartOfLine()) in_directive = token.is(clang::tok::hash);
    Tok tok;
    tok.kind = token.getKind();
    tok.offset = token.getLocation().getRawEncoding() - clang::SourceLocation().getRawEncoding();
    tok.in_directive = in_directive;
    if (token.is(clang::tok::raw_identifier)) {
      tok.identifier = std::string_view(token.getRawIdentifier().data(), token.getLength());
      tok.dirty = token.needsCleaning() || tok.identifier.find('\\') != std::string_view::npos;
    }
    tokens.push_back(tok);
  }
  return tokens;
}

bool is_open(clang::tok::TokenKind kind) {
  return kind == clang::tok::l_paren || kind == clang::tok::l_square || kind == clang::tok::l_brace;
}
bool is_close(clang::tok::TokenKind kind) {
  return kind == clang::tok::r_paren || kind == clang::tok::r_square || kind == clang::tok::r_brace;
}

clang::tok::TokenKind closing_of(clang::tok::TokenKind open) {
  if (open == clang::tok::l_paren) return clang::tok::r_paren;
  if (open == clang::tok::l_square) return clang::tok::r_square;
  return clang::tok::r_brace;
}

// For every bracket token, the index of its partner; npos where there is none. After a
// bracket that closes the wrong kind, nothing more is matched (every later question about
// a name then has no answer, which means "maybe a definition").
std::vector<std::size_t> match_brackets(const std::vector<Tok>& tokens) {
  std::vector<std::size_t> match(tokens.size(), std::string_view::npos);
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].in_directive) continue;
    if (is_open(tokens[i].kind)) {
      open.push_back(i);
    } else if (is_close(tokens[i].kind) && !open.empty()) {
      if (closing_of(tokens[open.back()].kind) != tokens[i].kind) break;
      match[i] = open.back();
      match[open.back()] = i;
      open.pop_back();
    }
  }
  return match;
}

// Words that can stand before `(` in a declaration without being the declared name.
bool is_not_a_name(std::string_view word) {
  static const std::set<std::string_view> kWords{
      "decltype", "noexcept", "throw", "alignas", "alignof", "sizeof", "requires",
      "__attribute__", "__declspec", "static_assert", "typeof", "__typeof__", "void", "bool",
      "char", "short", "int", "long", "float", "double", "signed", "unsigned", "auto",
      "const", "volatile", "explicit"};
  return kWords.count(word) > 0;
}

// The guarded declaration around the mention at token `mention`: where it starts and ends and
// the names it may declare. Nothing when it is not a plain declaration ended by `;` (a
// definition, a guard in a macro, ...).
struct GuardedDeclaration {
  std::size_t first = 0;
  std::size_t last = 0;
  std::set<std::string, std::less<>> names;
};

std::optional<GuardedDeclaration> guarded_declaration(const std::vector<Tok>& tokens,
                                                      const std::vector<std::size_t>& match,
                                                      std::size_t mention) {
  if (tokens[mention].in_directive) return std::nullopt;
  GuardedDeclaration declaration;
  // Back to the end of the previous declaration (a guard may follow the declared name).
  std::size_t first = mention;
  while (first > 0) {
    const Tok& before = tokens[first - 1];
    if (before.in_directive || before.kind == clang::tok::semi ||
        before.kind == clang::tok::l_brace || before.kind == clang::tok::r_brace) {
      break;
    }
    --first;
  }
  declaration.first = first;
  // Forward to its `;` outside brackets; attributes are skipped, `=` and `{` give up.
  int depth = 0;
  for (std::size_t i = first; i < tokens.size(); ++i) {
    const Tok& tok = tokens[i];
    if (tok.in_directive || tok.dirty) return std::nullopt;
    if (tok.kind == clang::tok::l_square && i + 1 < tokens.size() &&
        tokens[i + 1].kind == clang::tok::l_square) {
      if (match[i] == std::string_view::npos) return std::nullopt;
      i = match[i];  // the whole `[[...]]`
      continue;
    }
    if (is_open(tok.kind)) {
      if (depth == 0 && tok.kind == clang::tok::l_brace) return std::nullopt;  // a definition
      ++depth;
    } else if (is_close(tok.kind)) {
      if (--depth < 0) return std::nullopt;
    } else if (depth == 0 && tok.kind == clang::tok::equal) {
      return std::nullopt;  // `= 0`, `= delete`, `= default`: the parse judges those
    } else if (depth == 0 && tok.kind == clang::tok::semi) {
      declaration.last = i;
      if (declaration.names.empty()) return std::nullopt;
      return declaration;
    }
    if (tok.identifier == "operator") {
      declaration.names.insert("operator");
    } else if (!tok.identifier.empty() && i + 1 < tokens.size() &&
               tokens[i + 1].kind == clang::tok::l_paren && !is_not_a_name(tok.identifier)) {
      declaration.names.insert(std::string(tok.identifier));
    }
  }
  return std::nullopt;
}

// After `f(...)`, tokens that only an expression or the end of a declaration can bring.
bool ends_a_use(clang::tok::TokenKind kind) {
  switch (kind) {
    case clang::tok::semi:
    case clang::tok::comma:
    case clang::tok::r_square:
    case clang::tok::r_brace:
    case clang::tok::period:
    case clang::tok::equalequal:
    case clang::tok::exclaimequal:
    case clang::tok::greater:
    case clang::tok::greaterequal:
    case clang::tok::lessequal:
    case clang::tok::plus:
    case clang::tok::minus:
    case clang::tok::slash:
    case clang::tok::pipepipe:
    case clang::tok::pipe:
    case clang::tok::caret:
    case clang::tok::lessless:
    case clang::tok::greatergreater:
      return true;
    default:
      return false;
  }
}

// Statements that only a function body holds: a name in them is used, not defined.
bool starts_a_statement_of_a_body(const Tok& tok) {
  static const std::set<std::string_view> kWords{"return", "if", "else", "while", "for",
                                                 "do", "switch", "case", "throw", "co_return",
                                                 "co_yield", "co_await"};
  return !tok.identifier.empty() && kWords.count(tok.identifier) > 0;
}

// True unless the occurrence at `at` is certainly not a definition of the name there.
bool may_define_at(const std::vector<Tok>& tokens, const std::vector<std::size_t>& match,
                   std::size_t at, std::size_t statement_start) {
  if (tokens[at].in_directive) return true;  // a macro may define it
  if (at > 0 && (tokens[at - 1].kind == clang::tok::period ||
                 tokens[at - 1].kind == clang::tok::arrow)) {
    return false;  // a member access
  }
  if (statement_start < at && starts_a_statement_of_a_body(tokens[statement_start])) {
    return false;
  }
  std::size_t next = at + 1;
  if (next >= tokens.size()) return true;
  if (tokens[next].kind == clang::tok::semi) return false;
  if (tokens[next].kind != clang::tok::l_paren) return true;
  // `f(...)`, then outwards through closing parentheses of enclosing calls or conditions.
  std::size_t close = match[next];
  while (true) {
    if (close == std::string_view::npos || close + 1 >= tokens.size()) return true;
    const Tok& after = tokens[close + 1];
    if (after.in_directive) return true;
    if (ends_a_use(after.kind)) return false;
    if (after.kind != clang::tok::r_paren) return true;
    close = close + 1;
  }
}

// True unless every occurrence of the names in `tokens` (`match`: their brackets, as
// match_brackets gives them) is certainly not a definition. The tokens in `skip` (the guarded declarations themselves) are not looked at.
bool may_define(const std::vector<Tok>& tokens, const std::vector<std::size_t>& match,
                const std::set<std::string, std::less<>>& names,
                const std::vector<std::pair<std::size_t, std::size_t>>& skip) {
  std::size_t statement_start = 0;
  std::size_t open = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const Tok& tok = tokens[i];
    if (tok.kind == clang::tok::hashhash) return true;  // pasting may spell the name
    if (is_open(tok.kind) && !tok.in_directive) ++open;
    if (is_close(tok.kind) && !tok.in_directive) {
      if (open == 0) return true;  // braces out of step: a macro holds some of them
      --open;
    }
    if (tok.dirty) return true;
    const bool skipped = std::any_of(skip.begin(), skip.end(), [&](const auto& range) {
      return i >= range.first && i <= range.second;
    });
    if (!skipped && !tok.identifier.empty() && names.count(tok.identifier) > 0 &&
        may_define_at(tokens, match, i, statement_start)) {
      return true;
    }
    if (tok.in_directive || tok.kind == clang::tok::semi || tok.kind == clang::tok::l_brace ||
        tok.kind == clang::tok::r_brace) {
      statement_start = i + 1;
    }
  }
  return open != 0;  // braces out of step
}

}  // namespace

// `texts` holds each scanned file, the source first (which mentions no guard here).
HeaderGuards classify_header_guards(const std::vector<std::string>& texts,
                                    const std::vector<std::vector<GuardMention>>& mentions) {
  HeaderGuards result;
  std::set<std::string, std::less<>> names;
  std::vector<std::vector<Tok>> tokens(texts.size());
  std::vector<std::vector<std::size_t>> matches(texts.size());
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> declarations(texts.size());
  for (std::size_t file = 0; file < texts.size(); ++file) {
    tokens[file] = lex_tokens(texts[file]);
    matches[file] = match_brackets(tokens[file]);
    for (const GuardMention& mention : mentions[file]) {
      const auto at = std::lower_bound(
          tokens[file].begin(), tokens[file].end(), mention.offset,
          [](const Tok& tok, std::size_t offset) { return tok.offset < offset; });
      if (at == tokens[file].end() || at->offset != mention.offset || mention.in_directive) {
        result.declarations_only_used = false;  // a guard in a macro: anything goes
        return result;
      }
      const auto declaration = guarded_declaration(
          tokens[file], matches[file], static_cast<std::size_t>(at - tokens[file].begin()));
      if (!declaration) {
        if (result.defining.empty() || result.defining.back() != file) {
          result.defining.push_back(file);
        }
        continue;
      }
      names.insert(declaration->names.begin(), declaration->names.end());
      declarations[file].emplace_back(declaration->first, declaration->last);
    }
  }
  for (std::size_t file = 0; file < texts.size(); ++file) {
    if (may_define(tokens[file], matches[file], names, declarations[file])) {
      result.declarations_only_used = false;
      break;
    }
  }
  return result;
}

}  // namespace dlock::codegen
