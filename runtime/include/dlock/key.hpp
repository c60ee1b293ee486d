// dlock::Key: the name of a lock, as the user wrote it (before the service namespace).
//
//   dlock::Key key{fmt::format("order:{}", id)};
//
// Any bytes are allowed: empty, binary, ':', '{' and '}'. Backends namespace and escape keys
// so that two different keys never share a lock.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace dlock {

class Key {
 public:
  Key() = default;
  Key(std::string bytes) : bytes_(std::move(bytes)) {}  // NOLINT: implicit by design
  Key(std::string_view bytes) : bytes_(bytes) {}        // NOLINT
  Key(const char* bytes) : bytes_(bytes) {}             // NOLINT

  [[nodiscard]] const std::string& str() const noexcept { return bytes_; }
  [[nodiscard]] bool empty() const noexcept { return bytes_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }

  friend bool operator==(const Key& a, const Key& b) noexcept { return a.bytes_ == b.bytes_; }
  friend bool operator!=(const Key& a, const Key& b) noexcept { return !(a == b); }
  friend bool operator<(const Key& a, const Key& b) noexcept { return a.bytes_ < b.bytes_; }

 private:
  std::string bytes_;
};

}  // namespace dlock
