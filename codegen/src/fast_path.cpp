#include "dlock/codegen/fast_path.hpp"

#include <clang/Basic/LangOptions.h>
#include <clang/Basic/SourceLocation.h>
#include <clang/Lex/Lexer.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/files.hpp"
#include "header_guards.hpp"

namespace dlock::codegen {
namespace fs = std::filesystem;
namespace {

struct Include {
  std::string name;
  bool angled = false;
  std::size_t begin = 0;  ///< the name with its quotes or brackets, in the includer's text
  std::size_t end = 0;
};

// One raw-lexed file: its mentions of the guard and its #include directives.
struct FileScan {
  std::vector<GuardMention> mentions;
  bool conclusive = true;
  std::vector<Include> includes;
};

// Reads the header name after `#include` from the text, since raw lexing does not form
// header-name tokens. Returns false for any other form (a macro).
bool read_header_name(std::string_view text, std::size_t from, Include& include) {
  std::size_t i = from;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i >= text.size() || (text[i] != '"' && text[i] != '<')) return false;
  include.angled = text[i] == '<';
  const std::size_t end = text.find_first_of(include.angled ? ">\n" : "\"\n", i + 1);
  if (end == std::string_view::npos || text[end] == '\n') return false;
  include.name = std::string(text.substr(i + 1, end - i - 1));
  include.begin = i;
  include.end = end + 1;
  return !include.name.empty();
}

}  // namespace

const clang::LangOptions& token_lexing_options() {
  static const clang::LangOptions kOptions = [] {
    clang::LangOptions lang = raw_lexing_options();
    lang.Digraphs = 1;  // `<%` is a `{` to g++, so it must be one here
    return lang;
  }();
  return kOptions;
}

namespace {

// `text` must be followed by a NUL, as std::string's data is.
FileScan scan_text(std::string_view text) {
  clang::Lexer lexer(clang::SourceLocation(), token_lexing_options(), text.data(), text.data(),
                     text.data() + text.size());
  FileScan scan;
  // `dlock :: guard`, or `guard` anywhere in a `[[using dlock: ...]]` list.
  bool in_using_dlock = false;
  bool after_hash = false;
  bool in_directive = false;
  clang::Token before;
  clang::Token previous;
  before.startToken();
  previous.startToken();
  auto is_identifier = [](const clang::Token& token, llvm::StringRef name) {
    return token.is(clang::tok::raw_identifier) && token.getRawIdentifier() == name;
  };
  auto offset_of = [](const clang::Token& token) -> std::size_t {
    return token.getLocation().getRawEncoding() - clang::SourceLocation().getRawEncoding();
  };
  clang::Token token;
  while (true) {
    lexer.LexFromRawLexer(token);
    if (token.is(clang::tok::eof)) break;
    // A directive runs to the end of its line; the raw lexer has already joined `\`-newlines.
    if (token.isAtStartOfLine()) in_directive = token.is(clang::tok::hash);
    if (after_hash && token.is(clang::tok::raw_identifier)) {
      const llvm::StringRef directive = token.getRawIdentifier();
      // A directive name spelled across a line splice cannot be read here; `include_next`
      // depends on where its includer was found, which the scan does not track.
      if (token.needsCleaning() || directive == "include_next") scan.conclusive = false;
      if (directive == "include" || directive == "import") {
        Include include;
        if (read_header_name(text, offset_of(token) + token.getLength(), include)) {
          scan.includes.push_back(std::move(include));
        } else {
          scan.conclusive = false;
        }
      }
    }
    after_hash = token.is(clang::tok::hash) && token.isAtStartOfLine();
    if (is_identifier(token, "guard") && (in_using_dlock || (previous.is(clang::tok::coloncolon) &&
                                                             is_identifier(before, "dlock")))) {
      scan.mentions.push_back({offset_of(token), in_directive});
    }
    if (token.is(clang::tok::colon) && is_identifier(previous, "dlock") &&
        is_identifier(before, "using")) {
      in_using_dlock = true;
    } else if (token.is(clang::tok::r_square)) {
      in_using_dlock = false;
    }
    before = previous;
    previous = token;
  }
  return scan;
}

// The file as the compiler opens it. `dir/link/../x.h` leads where the link leads, which the
// lexical `dir/x.h` may not: then the real path names it (as the parse names it).
std::optional<fs::path> existing(const fs::path& candidate) {
  std::error_code ec;
  if (!fs::is_regular_file(candidate, ec)) return std::nullopt;
  fs::path lexical = fs::absolute(candidate, ec).lexically_normal();
  if (!fs::equivalent(candidate, lexical, ec)) return fs::canonical(candidate, ec);
  return lexical;
}

std::optional<fs::path> resolve(const Include& include, const fs::path& includer_dir,
                                const SearchPaths& paths) {
  if (fs::path(include.name).is_absolute()) return existing(include.name);
  if (!include.angled) {
    if (auto found = existing(includer_dir / include.name)) return found;
    for (const std::string& dir : paths.quote_dirs) {
      if (auto found = existing(fs::path(dir) / include.name)) return found;
    }
  }
  for (const std::string& dir : paths.bracket_dirs) {
    if (auto found = existing(fs::path(dir) / include.name)) return found;
  }
  return std::nullopt;  // a system header, or one clang will report as missing
}

}  // namespace

std::vector<GuardMention> find_guard_mentions(std::string_view text) {
  const std::string copy(text);  // the lexer needs a NUL after the text
  return scan_text(copy).mentions;
}

bool mentions_guard(std::string_view text) { return !find_guard_mentions(text).empty(); }

namespace {

// An #include still to follow, with where its includer is.
struct Pending {
  fs::path includer_dir;
  std::size_t includer;
  Include include;
};

// The headers' guards only, all found: may the source skip the parse, and which headers does a
// parse of some source weave?
void settle_header_guards(IncludeScan& result,
                          const std::vector<std::vector<GuardMention>>& mentions) {
  const HeaderGuards guards = classify_header_guards(result.texts, mentions);
  result.only_used = guards.declarations_only_used && guards.defining.empty();
  if (guards.declarations_only_used) result.defining_headers = guards.defining;
}

}  // namespace

IncludeScan scan_for_guards(const std::string& source_path, std::string_view source_text,
                            const SearchPaths& paths) {
  IncludeScan result;
  std::error_code ec;
  const fs::path source = fs::absolute(source_path, ec).lexically_normal();
  std::map<fs::path, std::size_t> index{{source, 0}};
  result.files.push_back(source.string());
  result.texts.emplace_back(source_text);
  std::vector<std::vector<GuardMention>> mentions;

  // Forced includes come first, found from the current directory as g++ does; they have no
  // includer (ScannedInclude::kCommandLine).
  std::deque<Pending> pending;
  for (const std::string& forced : paths.forced_includes) {
    pending.push_back({fs::current_path(ec), ScannedInclude::kCommandLine, Include{forced}});
  }
  auto follow = [&](const fs::path& file, std::size_t at, FileScan scan) {
    result.guard_found = result.guard_found || !scan.mentions.empty();
    if (!scan.mentions.empty()) result.guard_files.push_back(file.string());
    result.conclusive = result.conclusive && scan.conclusive;
    mentions.push_back(std::move(scan.mentions));
    for (Include& include : scan.includes) {
      pending.push_back({file.parent_path(), at, std::move(include)});
    }
  };
  follow(source, 0, scan_text(result.texts.front()));
  // A guard in the source itself always takes the parse; one in a header needs every project
  // header, to look for definitions of what it guards.
  const bool guard_in_source = result.guard_found;
  bool missing_quoted = false;

  while (!pending.empty() && !guard_in_source && result.conclusive) {
    Pending next = std::move(pending.front());
    pending.pop_front();
    const auto header = resolve(next.include, next.includer_dir, paths);
    if (!header) {
      // A quoted include found nowhere (not generated yet?) may hold a definition.
      missing_quoted = missing_quoted || !next.include.angled;
      continue;
    }
    const auto [known, inserted] = index.emplace(*header, result.files.size());
    result.includes.push_back(
        {next.includer, known->second, {next.include.begin, next.include.end}});
    if (!inserted) continue;
    result.files.push_back(header->string());
    std::string text;
    std::string error;
    if (!read_file(header->string(), text, error)) {
      result.conclusive = false;  // let clang say what is wrong with it
      break;
    }
    result.texts.push_back(std::move(text));
    follow(*header, known->second, scan_text(result.texts.back()));
  }
  if (result.conclusive && result.guard_found && !guard_in_source && !missing_quoted) {
    settle_header_guards(result, mentions);
  }
  return result;
}

}  // namespace dlock::codegen
