#include "zookeeper/zk_names.hpp"

#include <fmt/format.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <charconv>

#include "bytes.hpp"
#include "zookeeper/zk_session.hpp"

namespace dlock::internal::zk {

std::int64_t sequence_of(std::string_view name) {
  if (name.size() < kSequenceDigits) return -1;
  std::int64_t value = -1;
  const std::string_view digits = name.substr(name.size() - kSequenceDigits);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return -1;
  return value;
}

std::string_view owner_in(std::string_view name) {
  static_assert(kLockPrefix.size() == kSharedPrefix.size());
  const std::string_view prefix = name.substr(0, kLockPrefix.size());
  if ((prefix != kLockPrefix && prefix != kSharedPrefix) || sequence_of(name) < 0 ||
      name.size() < kLockPrefix.size() + kSequenceDigits + 2) {
    return {};
  }
  return name.substr(kLockPrefix.size(), name.size() - kLockPrefix.size() - kSequenceDigits - 1);
}

std::size_t blocker_of(const std::vector<std::string>& queue, std::size_t place) {
  if (!is_shared(queue[place])) return place == 0 ? place : place - 1;
  for (std::size_t i = place; i-- > 0;) {
    if (!is_shared(queue[i])) return i;
  }
  return place;
}

std::vector<std::string> queue_of(std::vector<std::string> children) {
  std::erase_if(children, [](const std::string& c) { return owner_in(c).empty(); });
  sort_by_sequence(children);
  return children;
}

std::vector<std::string> fields_of(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t space = std::min(text.find(' ', start), text.size());
    out.emplace_back(text.substr(start, space - start));
    start = space + 1;
  }
  return out;
}

long long number_in(const std::vector<std::string>& fields, std::size_t index) {
  long long value = 0;
  if (index < fields.size()) {
    std::from_chars(fields[index].data(), fields[index].data() + fields[index].size(), value);
  }
  return value;
}

std::string text_in(const std::vector<std::string>& fields, std::size_t index) {
  return index < fields.size() ? unhex(fields[index]) : std::string();
}

bool connection_trouble(int rc) {
  return rc == kNoAnswer || rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
         rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE;
}

std::string znode_name(std::string_view text) {
  if (text.empty() || text == "." || text == "..") {
    std::string out = "%";
    for (const char c : text) out += fmt::format("{:02X}%", static_cast<unsigned char>(c));
    return out;
  }
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '/' || c == '%' || byte < 0x21 || byte > 0x7e) {
      out += fmt::format("%{:02X}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

void sort_by_sequence(std::vector<std::string>& names, bool newest_first) {
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return newest_first ? sequence_of(a) > sequence_of(b) : sequence_of(a) < sequence_of(b);
  });
}

}  // namespace dlock::internal::zk
