#include "dlock/codegen/key_template.hpp"

#include <cstdint>
#include <optional>

namespace dlock::codegen {
namespace {

bool is_identifier_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool is_identifier_char(char c) { return is_identifier_start(c) || (c >= '0' && c <= '9'); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::uint32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

// `\ooo`: up to three octal digits after the backslash at text[i].
std::size_t decode_octal(std::string_view text, std::size_t i, std::size_t base, std::string& out,
                         std::vector<Problem>& problems) {
  std::size_t end = i + 1;
  unsigned value = 0;
  while (end < text.size() && end < i + 4 && text[end] >= '0' && text[end] <= '7') {
    value = value * 8 + static_cast<unsigned>(text[end] - '0');
    ++end;
  }
  if (value > 0xFF) {
    problems.push_back({base + i, end - i, "octal escape sequence out of range", {}, {}});
  }
  out += static_cast<char>(value & 0xFF);
  return end - i;
}

// `\xhh...`, `\uhhhh`, `\Uhhhhhhhh` at text[i].
std::size_t decode_hex(std::string_view text, std::size_t i, std::size_t base, std::string& out,
                       std::vector<Problem>& problems) {
  const char c = text[i + 1];
  std::size_t end = i + 2;
  const std::size_t max_digits = c == 'x' ? std::string_view::npos : (c == 'u' ? 4 : 8);
  std::uint64_t value = 0;
  bool overflow = false;
  while (end < text.size() && hex_value(text[end]) >= 0 && end - (i + 2) < max_digits) {
    value = value * 16 + static_cast<std::uint64_t>(hex_value(text[end]));
    if (value > 0x10FFFF) overflow = true;
    ++end;
  }
  const std::size_t digits = end - (i + 2);
  if (digits == 0 || (c != 'x' && digits != max_digits)) {
    problems.push_back({base + i, end - i, "incomplete escape sequence", {}, {}});
  } else if (c == 'x') {
    if (overflow || value > 0xFF) {
      problems.push_back({base + i, end - i, "hex escape sequence out of range", {}, {}});
    }
    out += static_cast<char>(value & 0xFF);
  } else if (overflow || (value >= 0xD800 && value <= 0xDFFF)) {
    problems.push_back({base + i, end - i, "invalid universal character", {}, {}});
  } else {
    append_utf8(static_cast<std::uint32_t>(value), out);
  }
  return end - i;
}

// Decodes the escape sequence at text[i] == '\\' (text ends before the closing quote) into
// `out`; returns how many characters it spans. clang never sees these literals (it skips the
// attribute's arguments), so malformed escapes are reported here.
std::size_t decode_escape(std::string_view text, std::size_t i, std::size_t base,
                          std::string& out, std::vector<Problem>& problems) {
  if (i + 1 >= text.size()) {
    problems.push_back({base + i, 1, "incomplete escape sequence", {}, {}});
    return 1;
  }
  const char c = text[i + 1];
  switch (c) {
    case '\'': out += '\''; return 2;
    case '"': out += '"'; return 2;
    case '?': out += '?'; return 2;
    case '\\': out += '\\'; return 2;
    case 'a': out += '\a'; return 2;
    case 'b': out += '\b'; return 2;
    case 'f': out += '\f'; return 2;
    case 'n': out += '\n'; return 2;
    case 'r': out += '\r'; return 2;
    case 't': out += '\t'; return 2;
    case 'v': out += '\v'; return 2;
    default: break;
  }
  if (c >= '0' && c <= '7') return decode_octal(text, i, base, out, problems);
  if (c == 'x' || c == 'u' || c == 'U') return decode_hex(text, i, base, out, problems);
  problems.push_back(
      {base + i, 2, "unknown escape sequence '\\" + std::string(1, c) + "'", {}, {}});
  out += c;
  return 2;
}

// Literal key text goes into an fmt format string, where braces are special.
void append_literal_text(std::string_view bytes, std::string& format) {
  for (char c : bytes) {
    if (c == '{' || c == '}') format += c;
    format += c;
  }
}

std::size_t skip_spaces(std::string_view text, std::size_t i) {
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  return i;
}

std::size_t scan_identifier(std::string_view text, std::size_t i) {
  if (i >= text.size() || !is_identifier_start(text[i])) return i;
  while (i < text.size() && is_identifier_char(text[i])) ++i;
  return i;
}

constexpr const char* kLiteralLessHint = "; write '<<' for a literal '<'";
constexpr const char* kChainHint =
    "; a placeholder is a parameter name or 'this', then .member or ->member";

// `.` or `->` at text[i]: sets the step's access and returns the index after it; nullopt for
// neither.
std::optional<std::size_t> read_access(std::string_view text, std::size_t i, MemberStep& step) {
  if (text[i] == '.') {
    step.access = Access::kDot;
    return i + 1;
  }
  if (text.substr(i, 2) == "->") {
    step.access = Access::kArrow;
    return i + 2;
  }
  return std::nullopt;
}

// Parses the placeholder whose '<' is at text[start]; returns the index after its '>' (or
// after the text when it is unterminated). `text` is the literal without its quotes.
std::size_t parse_placeholder(std::string_view text, std::size_t start, std::size_t base,
                              KeyTemplate& key, std::vector<Problem>& problems) {
  auto fail = [&](std::size_t at, std::size_t length, std::string message) {
    problems.push_back({base + at, length, std::move(message), {}, {}});
    const std::size_t close = text.find('>', at);
    return close == std::string_view::npos ? text.size() : close + 1;
  };
  auto unterminated = [&] {
    problems.push_back(
        {base + start, 1, std::string("unterminated placeholder in lock key") + kLiteralLessHint,
         {}, {}});
    return text.size();
  };

  Placeholder placeholder;
  placeholder.offset = base + start;
  std::size_t i = skip_spaces(text, start + 1);
  if (i >= text.size()) return unterminated();
  if (text[i] == '>') {
    return fail(start, i + 1 - start, std::string("empty placeholder '<>' in lock key") +
                                          kLiteralLessHint);
  }
  std::size_t end = scan_identifier(text, i);
  if (end == i) {
    return fail(i, 1, "expected a parameter name or 'this' after '<' in lock key" +
                          std::string(kLiteralLessHint));
  }
  placeholder.root = std::string(text.substr(i, end - i));
  placeholder.root_offset = base + i;
  i = end;
  while (true) {
    i = skip_spaces(text, i);
    if (i >= text.size()) return unterminated();
    if (text[i] == '>') break;
    MemberStep step;
    step.offset = base + i;
    const auto after_access = read_access(text, i, step);
    if (!after_access) {
      return fail(i, 1,
                  "unexpected '" + std::string(1, text[i]) + "' in placeholder" + kChainHint);
    }
    i = *after_access;
    i = skip_spaces(text, i);
    end = scan_identifier(text, i);
    if (end == i) {
      if (i >= text.size()) return unterminated();
      const char* access = step.access == Access::kDot ? "'.'" : "'->'";
      return fail(i, 1, std::string("expected a member name after ") + access + " in placeholder");
    }
    step.name = std::string(text.substr(i, end - i));
    step.name_offset = base + i;
    placeholder.members.push_back(std::move(step));
    i = end;
  }
  placeholder.length = base + i + 1 - placeholder.offset;
  key.placeholders.push_back(std::move(placeholder));
  key.format += "{}";
  return i + 1;
}

bool check_plain_literal(std::string_view spelling, std::size_t offset, const char* what,
                         std::vector<Problem>& problems) {
  if (spelling.size() >= 2 && spelling.front() == '"' && spelling.back() == '"') return true;
  problems.push_back(
      {offset, spelling.size(), std::string(what) + " must be a plain string literal", {}, {}});
  return false;
}

}  // namespace

void append_key_literal(std::string_view spelling, std::size_t offset, KeyTemplate& key,
                        std::vector<Problem>& problems) {
  if (!check_plain_literal(spelling, offset, "the lock key", problems)) return;
  const std::string_view text = spelling.substr(1, spelling.size() - 2);
  const std::size_t base = offset + 1;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\\') {
      std::string bytes;
      i += decode_escape(text, i, base, bytes, problems);
      append_literal_text(bytes, key.format);
    } else if (c == '<' && text.substr(i, 2) == "<<") {
      key.format += '<';
      i += 2;
    } else if (c == '<') {
      i = parse_placeholder(text, i, base, key, problems);
    } else if (c == '>' && text.substr(i, 2) == ">>") {
      key.format += '>';
      i += 2;
    } else if (c == '>') {
      problems.push_back({base + i, 1,
                          "unmatched '>' in lock key; write '>>' for a literal '>'", ">>", {}});
      ++i;
    } else {
      append_literal_text(std::string_view(&text[i], 1), key.format);
      ++i;
    }
  }
}

bool decode_string_literal(std::string_view spelling, std::size_t offset, std::string& bytes,
                           std::vector<Problem>& problems) {
  if (!check_plain_literal(spelling, offset, "the value", problems)) return false;
  const std::string_view text = spelling.substr(1, spelling.size() - 2);
  const std::size_t errors_before = problems.size();
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '\\') {
      i += decode_escape(text, i, offset + 1, bytes, problems);
    } else {
      bytes += text[i++];
    }
  }
  return problems.size() == errors_before;
}

std::string to_string_literal(std::string_view bytes) {
  static constexpr char kOctal[] = "01234567";
  std::string out = "\"";
  char previous = 0;
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '?' && previous == '?') {
      out += "\\?";  // no trigraph when compiled as C++14 or with -trigraphs
    } else if (byte >= 0x20 && byte < 0x7F) {
      out += c;
    } else {
      // Three octal digits always end the escape, whatever follows.
      out += '\\';
      out += kOctal[(byte >> 6) & 7];
      out += kOctal[(byte >> 3) & 7];
      out += kOctal[byte & 7];
    }
    previous = c;
  }
  out += '"';
  return out;
}

std::string placeholder_expression(const Placeholder& placeholder, std::string_view root_spelling) {
  std::string out(root_spelling);
  for (const MemberStep& step : placeholder.members) {
    out += step.access == Access::kDot ? "." : "->";
    out += step.name;
  }
  return out;
}

std::string key_text(const KeyTemplate& key) {
  std::string text;
  std::size_t next = 0;
  const std::string& format = key.format;
  for (std::size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      text += c;  // a doubled brace is one literal brace
      ++i;
    } else if (c == '{' && next < key.placeholders.size()) {
      const Placeholder& placeholder = key.placeholders[next++];
      text += "<" + placeholder_expression(placeholder, placeholder.root) + ">";
      ++i;  // the `}` of `{}`
    } else if (c == '<' || c == '>') {
      text += std::string(2, c);
    } else {
      text += c;
    }
  }
  return text;
}

}  // namespace dlock::codegen
