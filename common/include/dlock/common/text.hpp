// Text helpers shared by the runtime, the configuration loader, the generator and dlockctl.
//
//   printable("k\x01y", kLogText)          // "k\x01y" with the byte escaped: k\x01y
//   percent_decode("p%40ss")               // "p@ss"
//   endpoint_text("::1", 6379)             // "[::1]:6379"
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::common {

/// How printable() shows bytes. Control bytes (below 0x20) and DEL are always written \xNN;
/// the profiles differ only in what their reader needs:
struct TextProfile {
  bool keep_utf8;          ///< bytes from 0x80 kept as they are (text a person wrote), else \xNN
  char backslash;          ///< how '\' is written: 0 as it is, 'x' as \x5c, '\\' doubled
  /// Longer text is cut; 0: never. With keep_utf8, after max_bytes of the text (not inside a
  /// UTF-8 sequence); otherwise once the output, escapes included, is max_bytes long.
  std::size_t max_bytes;
};

/// Log lines (runtime/src/log.cpp): one line of ASCII a machine splits on spaces; keys are
/// arbitrary bytes and may be long.
inline constexpr TextProfile kLogText{false, 'x', 120};
/// Error messages that echo what a person wrote (the YAML loader): UTF-8 stays readable.
inline constexpr TextProfile kMessageText{true, 0, 80};
/// dlockctl's tables: every byte of a key visible, nothing cut.
inline constexpr TextProfile kTerminalText{false, '\\', 0};

/// `text` made safe to print under `profile`; a cut text ends in "...(N bytes)".
[[nodiscard]] inline std::string printable(std::string_view text, const TextProfile& profile) {
  std::size_t end = text.size();
  if (profile.max_bytes != 0 && profile.keep_utf8 && end > profile.max_bytes) {
    end = profile.max_bytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  }
  const bool cut_output = profile.max_bytes != 0 && !profile.keep_utf8;
  std::string out;
  out.reserve(end);
  std::size_t i = 0;
  for (; i < end && !(cut_output && out.size() >= profile.max_bytes); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const bool control = byte < 0x20 || byte == 0x7F || (byte >= 0x80 && !profile.keep_utf8);
    if (byte == '\\' && profile.backslash == '\\') {
      out += "\\\\";
    } else if (control || (byte == '\\' && profile.backslash == 'x')) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out.push_back(text[i]);
    }
  }
  if (i < text.size()) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

/// `%XX` sequences decoded (either case of hex digit); nullopt for a `%` not followed by two
/// hex digits. With `only`, the stricter form an encoder of exactly those bytes writes: only
/// they may be encoded, in upper-case hex.
[[nodiscard]] inline std::optional<std::string> percent_decode(std::string_view text,
                                                               std::string_view only = {}) {
  const auto hex = [&](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f' && only.empty()) return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex(text[i + 1]);
    const int low = hex(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    const char decoded = static_cast<char>(high * 16 + low);
    if (!only.empty() && only.find(decoded) == std::string_view::npos) return std::nullopt;
    out.push_back(decoded);
    i += 2;
  }
  return out;
}

/// `host:port`, with an IPv6 host in brackets: `[::1]:6379`.
[[nodiscard]] inline std::string endpoint_text(std::string_view host, int port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out.append("[").append(host).append("]");
  } else {
    out.append(host);
  }
  return out + ":" + std::to_string(port);
}

}  // namespace dlock::common
