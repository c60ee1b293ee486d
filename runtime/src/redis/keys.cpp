#include "redis/keys.hpp"

namespace dlock::internal {

std::string escape_key_part(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '%': out += "%25"; break;
      case ':': out += "%3A"; break;
      case '{': out += "%7B"; break;
      case '}': out += "%7D"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> unescape_key_part(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const std::string_view code = text.substr(i + 1, 2);
    if (code == "25") out.push_back('%');
    else if (code == "3A") out.push_back(':');
    else if (code == "7B") out.push_back('{');
    else if (code == "7D") out.push_back('}');
    else return std::nullopt;
    i += 2;
  }
  return out;
}

LockKeys lock_keys(std::string_view service, std::string_view key) {
  std::string base;
  base.reserve(service.size() + key.size() + 16);
  base += "dlock:{";
  base += escape_key_part(service);
  base += ':';
  base += escape_key_part(key);
  base += '}';
  return LockKeys{base + ":lock", base + ":fence", base + ":released"};
}

}  // namespace dlock::internal
