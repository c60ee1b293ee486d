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

std::optional<LockName> lock_name_of(std::string_view name) {
  // `<mark>-<owner>-<10 digits>`, the owner not empty.
  const std::size_t dash = name.find('-');
  if (dash == std::string_view::npos || sequence_of(name) < 0 ||
      name.size() < dash + kSequenceDigits + 3 || name[name.size() - kSequenceDigits - 1] != '-') {
    return std::nullopt;
  }
  const std::string_view mark = name.substr(0, dash);
  LockName parsed;
  parsed.owner = name.substr(dash + 1, name.size() - dash - kSequenceDigits - 2);
  if (mark == kLockPrefix.substr(0, 1)) return parsed;
  if (mark == kSharedPrefix.substr(0, 1)) {
    parsed.kind = LockKind::kShared;
    return parsed;
  }
  if (mark.size() < 2 || mark.size() > 10 || mark[0] != kPermitMark) return std::nullopt;
  const auto [end, ec] = std::from_chars(mark.data() + 1, mark.data() + mark.size(), parsed.permits);
  if (ec != std::errc() || end != mark.data() + mark.size() || parsed.permits < 1) {
    return std::nullopt;
  }
  parsed.kind = LockKind::kPermit;
  return parsed;
}

std::string name_prefix(LockKind kind, int permits, std::string_view owner) {
  switch (kind) {
    case LockKind::kShared: return fmt::format("{}{}-", kSharedPrefix, owner);
    case LockKind::kPermit: return fmt::format("{}{}-{}-", kPermitMark, permits, owner);
    case LockKind::kExclusive: break;
  }
  return fmt::format("{}{}-", kLockPrefix, owner);
}

std::vector<Queued> kinds_in(const std::vector<std::string>& queue) {
  std::vector<Queued> kinds;
  kinds.reserve(queue.size());
  for (const std::string& name : queue) {
    const auto parsed = lock_name_of(name);
    kinds.push_back(parsed ? Queued{parsed->kind, parsed->permits} : Queued{});
  }
  return kinds;
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
