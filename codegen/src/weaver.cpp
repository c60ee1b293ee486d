#include "dlock/codegen/weaver.hpp"

#include <clang/Tooling/Core/Replacement.h>
#include <llvm/Support/Error.h>

namespace dlock::codegen {
namespace {

constexpr std::string_view kPrelude =
    "#include <dlock/guard.hpp>\n"
    "#include <fmt/core.h>\n";

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// `site.attribute.<field> = <value>; ` for an option the attribute sets; nothing otherwise.
std::string set_millis(std::string_view field, const std::optional<Millis>& value) {
  if (!value) return "";
  return "dlock_site_.attribute." + std::string(field) + " = ::dlock::Millis{" +
         std::to_string(value->count()) + "}; ";
}

// The lock kind's fields, only those the attribute gives.
std::string set_kind(const LockOptions& options) {
  std::string text;
  if (options.mode) {
    text += std::string("dlock_site_.attribute.mode = ") +
            (*options.mode == ::dlock::LockMode::kShared ? "::dlock::LockMode::kShared; "
                                                         : "::dlock::LockMode::kExclusive; ");
  }
  if (options.fair) {
    text += std::string("dlock_site_.attribute.fair = ") + (*options.fair ? "true; " : "false; ");
  }
  if (options.permits) {
    text += "dlock_site_.attribute.permits = " + std::to_string(*options.permits) + "; ";
  }
  return text;
}

// `::fmt::format("order:{}", (id))`
std::string format_key(const KeyCode& key) {
  std::string text = "::fmt::format(" + to_string_literal(key.format);
  for (const std::string& argument : key.arguments) text += ", (" + argument + ")";
  return text + ")";
}

std::string skip_statement(SkipReturn skip) {
  switch (skip) {
    case SkipReturn::kVoid: return " if (!dlock_guard_.entered()) return;";
    case SkipReturn::kBool: return " if (!dlock_guard_.entered()) return false;";
    case SkipReturn::kOptional: return " if (!dlock_guard_.entered()) return ::std::nullopt;";
    case SkipReturn::kNone: break;
  }
  return "";
}

// What replaces a removed attribute: its newlines, so that no line moves, or one space when
// the removal would glue two tokens together.
std::string removal_text(std::string_view source, ByteRange range) {
  std::string text;
  for (std::size_t i = range.begin; i < range.end; ++i) {
    if (source[i] == '\n') text += '\n';
  }
  auto is_word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  if (text.empty() && range.begin > 0 && range.end < source.size() &&
      is_word(source[range.begin - 1]) && is_word(source[range.end])) {
    text = " ";
  }
  return text;
}

}  // namespace

std::string line_directive(unsigned line, std::string_view file) {
  return "#line " + std::to_string(line) + " " + to_string_literal(file);
}

// Every field is set by name, in a lambda (C++17 has no designated initializers): a change
// of the order of the fields of GuardSite or LockOverrides cannot swap options.
std::string render_guard_code(const GuardCode& code) {
  const LockOptions& options = code.options;
  std::string text = "static const ::dlock::GuardSite dlock_guard_site_ = [] { ";
  text += "::dlock::GuardSite dlock_site_; ";
  text += "dlock_site_.name = " + to_string_literal(code.name) + "; ";
  if (!code.policy.empty()) text += "dlock_site_.policy = " + to_string_literal(code.policy) + "; ";
  text += set_millis("lease", options.lease);
  text += set_millis("wait", options.wait);
  if (options.on_busy) {
    text += std::string("dlock_site_.attribute.on_busy = ") +
            (*options.on_busy == BusyAction::kSkip ? "::dlock::OnBusy::kSkip; "
                                                   : "::dlock::OnBusy::kThrow; ");
  }
  text += set_millis("min_hold", options.min_hold);
  text += set_millis("max_hold", options.max_hold);
  text += set_kind(options);
  if (code.skip != SkipReturn::kNone) text += "dlock_site_.skippable = true; ";
  text += "dlock_site_.file = __FILE__; ";
  text += "dlock_site_.line = " + std::to_string(code.attribute.line) + "; ";
  text += "return dlock_site_; }(); ";
  text += "::dlock::Guard dlock_guard_(dlock_guard_site_, ";
  if (code.keys.size() == 1) {
    text += format_key(code.keys.front());
  } else {
    text += "::std::vector<::dlock::Key>{";
    for (std::size_t i = 0; i < code.keys.size(); ++i) {
      text += (i > 0 ? ", " : "") + format_key(code.keys[i]);
    }
    text += "}";
  }
  text += ");";
  text += skip_statement(code.skip);
  return text;
}

WeaveResult weave_source(std::string_view source, std::string_view path,
                         const std::vector<WeaveEdit>& edits,
                         const std::vector<TextEdit>& rewrites, bool prelude) {
  WeaveResult result;
  std::size_t bom = source.substr(0, kUtf8Bom.size()) == kUtf8Bom ? kUtf8Bom.size() : 0;
  const std::string file(path);
  clang::tooling::Replacements replacements;
  auto add = [&](std::size_t offset, std::size_t length, const std::string& text) {
    // Offsets are in the original file; the BOM is cut before the replacements apply.
    if (offset < bom) return true;
    if (llvm::Error error = replacements.add(
            clang::tooling::Replacement(file, offset - bom, length, text))) {
      result.error = llvm::toString(std::move(error));
      return false;
    }
    return true;
  };
  auto here = [&](const std::string& name) { return name.empty() || name == path; };
  for (const TextEdit& rewrite : rewrites) {
    if (!add(rewrite.range.begin, rewrite.range.end - rewrite.range.begin, rewrite.text)) {
      return result;
    }
  }
  for (const WeaveEdit& edit : edits) {
    if (edit.removal && here(edit.attribute_file) &&
        !add(edit.removal->begin, edit.removal->end - edit.removal->begin,
             removal_text(source, *edit.removal))) {
      return result;
    }
    if (!here(edit.body_file)) continue;
    const std::string insertion = "\n" + line_directive(edit.code.attribute.line,
                                                        edit.code.attribute.file) +
                                  "\n" + render_guard_code(edit.code) + "\n" +
                                  line_directive(edit.brace.line, edit.brace.file) + "\n";
    if (!add(edit.body_offset, 0, insertion)) return result;
  }
  llvm::Expected<std::string> woven =
      clang::tooling::applyAllReplacements(llvm::StringRef(source.substr(bom)), replacements);
  if (!woven) {
    result.error = llvm::toString(woven.takeError());
    return result;
  }
  result.text = std::string(prelude ? kPrelude : "") + line_directive(1, path) + "\n" + *woven;
  return result;
}

std::string passthrough_source(std::string_view source, std::string_view path) {
  if (source.substr(0, kUtf8Bom.size()) == kUtf8Bom) source.remove_prefix(kUtf8Bom.size());
  return line_directive(1, path) + "\n" + std::string(source);
}

}  // namespace dlock::codegen
