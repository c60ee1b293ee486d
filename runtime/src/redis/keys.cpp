#include "redis/keys.hpp"

#include <dlock/common/text.hpp>

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
  // Only what escape_key_part writes is read back.
  return common::percent_decode(text, "%:{}");
}

LockKeys lock_keys(std::string_view service, std::string_view key) {
  std::string base;
  base.reserve(service.size() + key.size() + 16);
  base += "dlock:{";
  base += escape_key_part(service);
  base += ':';
  base += escape_key_part(key);
  base += '}';
  return LockKeys{base + ":lock",    base + ":fence",  base + ":released",
                  base + ":holders", base + ":queue", base + ":places"};
}

}  // namespace dlock::internal
