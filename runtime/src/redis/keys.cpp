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

std::optional<std::string_view> hash_tag_of(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return std::nullopt;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return std::nullopt;
  return key.substr(open + 1, close - open - 1);
}

LockKeys lock_keys(std::string_view service, std::string_view key) {
  const auto tag = hash_tag_of(key);
  std::string base;
  base.reserve(service.size() + key.size() + (tag ? tag->size() + 24 : 16));
  base += "dlock:{";
  base += escape_key_part(service);
  base += ':';
  if (tag) {
    base += escape_key_part(*tag);
    base += "}:";
    base += escape_key_part(key);
  } else {
    base += escape_key_part(key);
    base += '}';
  }
  return LockKeys{base + ":lock",    base + ":fence",  base + ":released",
                  base + ":holders", base + ":queue", base + ":places"};
}

}  // namespace dlock::internal
