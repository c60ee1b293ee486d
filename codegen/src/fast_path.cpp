#include "dlock/codegen/fast_path.hpp"

#include <clang/Basic/LangOptions.h>
#include <clang/Basic/SourceLocation.h>
#include <clang/Lex/Lexer.h>

#include <deque>
#include <filesystem>
#include <optional>
#include <set>

#include "dlock/codegen/attribute_lexer.hpp"
#include "dlock/codegen/files.hpp"

namespace dlock::codegen {
namespace fs = std::filesystem;
namespace {

struct Include {
  std::string name;
  bool angled = false;
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
  return !include.name.empty();
}

// `text` must be followed by a NUL, as std::string's data is.
FileScan scan_text(std::string_view text) {
  clang::Lexer lexer(clang::SourceLocation(), raw_lexing_options(), text.data(), text.data(),
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
      if (directive == "include" || directive == "include_next" || directive == "import") {
        Include include;
        if (read_header_name(text, offset_of(token) + token.getLength(), include)) {
          scan.includes.push_back(std::move(include));
        } else {
          scan.conclusive = false;
        }
      }
    }
    after_hash = token.is(clang::tok::hash) && token.isAtStartOfLine();
    if (is_identifier(token, "guard") &&
        (in_using_dlock || (previous.is(clang::tok::coloncolon) && is_identifier(before, "dlock")))) {
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

std::optional<fs::path> existing(const fs::path& candidate) {
  std::error_code ec;
  if (fs::is_regular_file(candidate, ec)) return fs::absolute(candidate, ec).lexically_normal();
  return std::nullopt;
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

IncludeScan scan_for_guards(const std::string& source_path, std::string_view source_text,
                            const SearchPaths& paths) {
  IncludeScan result;
  std::error_code ec;
  const fs::path source = fs::absolute(source_path, ec).lexically_normal();
  std::set<fs::path> seen{source};
  result.files.push_back(source.string());

  // Forced includes come first, found from the current directory as g++ does.
  std::deque<std::pair<fs::path, Include>> pending;
  for (const std::string& forced : paths.forced_includes) {
    pending.emplace_back(fs::current_path(ec), Include{forced, false});
  }
  auto follow = [&](const fs::path& file, const FileScan& scan) {
    result.guard_found = result.guard_found || !scan.mentions.empty();
    result.conclusive = result.conclusive && scan.conclusive;
    for (const Include& include : scan.includes) pending.emplace_back(file.parent_path(), include);
  };
  follow(source, scan_text(std::string(source_text)));

  while (!pending.empty() && !result.guard_found && result.conclusive) {
    auto [includer_dir, include] = std::move(pending.front());
    pending.pop_front();
    const auto header = resolve(include, includer_dir, paths);
    if (!header) continue;
    if (!seen.insert(*header).second) continue;
    result.files.push_back(header->string());
    std::string text;
    std::string error;
    if (!read_file(header->string(), text, error)) {
      result.conclusive = false;  // let clang say what is wrong with it
      break;
    }
    follow(*header, scan_text(text));
  }
  return result;
}

}  // namespace dlock::codegen
