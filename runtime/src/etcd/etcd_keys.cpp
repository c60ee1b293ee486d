#include "etcd/etcd_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace dlock::internal {

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = prefix.back();
    if (static_cast<unsigned char>(last) != 0xFF) {
      last = static_cast<char>(static_cast<unsigned char>(last) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string hold_key(const std::string& prefix, LockKind kind, int permits, std::int64_t lease) {
  switch (kind) {
    case LockKind::kShared: return fmt::format("{}s{:016x}", prefix, lease);
    case LockKind::kPermit: return fmt::format("{}p{}-{:016x}", prefix, permits, lease);
    case LockKind::kExclusive: break;
  }
  return fmt::format("{}{:016x}", prefix, lease);
}

Queued kind_of_key(std::string_view key, std::string_view prefix) {
  const std::string_view name = key.substr(std::min(prefix.size(), key.size()));
  if (name.starts_with('s')) return {LockKind::kShared, 0};
  if (!name.starts_with('p')) return {LockKind::kExclusive, 0};
  // A size no request asks (-1) for a name that does not read: of another kind than any.
  Queued permit{LockKind::kPermit, -1};
  const auto dash = std::min(name.find('-'), name.size());
  int permits = 0;
  const auto [end, ec] = std::from_chars(name.data() + 1, name.data() + dash, permits);
  if (ec == std::errc() && end == name.data() + dash && permits > 0) permit.permits = permits;
  return permit;
}

pb::TxnRequest delete_of(const std::string& key, std::int64_t revision) {
  pb::TxnRequest txn;
  if (revision != 0) {
    auto* compare = txn.add_compare();
    compare->set_key(key);
    compare->set_target(pb::Compare::CREATE);
    compare->set_result(pb::Compare::EQUAL);
    compare->set_create_revision(revision);
  }
  txn.add_success()->mutable_request_delete_range()->set_key(key);
  return txn;
}

pb::RangeRequest only(const std::string& key) {
  pb::RangeRequest range;
  range.set_key(key);
  return range;
}

pb::RangeRequest under(const std::string& prefix) {
  pb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(prefix_end(prefix));
  return range;
}

pb::RangeRequest queue_range(const std::string& prefix, std::int64_t limit) {
  pb::RangeRequest range = under(prefix);
  range.set_sort_order(pb::RangeRequest::ASCEND);
  range.set_sort_target(pb::RangeRequest::CREATE);
  range.set_keys_only(true);
  range.set_limit(limit);
  return range;
}

}  // namespace dlock::internal
