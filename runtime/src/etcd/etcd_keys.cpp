#include "etcd/etcd_keys.hpp"

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
