// Guards on definitions in a header: woven in a copy of this header for each source that
// includes it, with #line pointing back here.
#pragma once

#include <optional>
#include <string>

namespace shop {

class Stock {
 public:
  // A member defined in its class body.
  [[dlock::guard("sku:<sku>", lease=10s)]] int reserve(long sku, int quantity) {
    return quantity + static_cast<int>(sku % 7);
  }

 private:
  int on_hand_ = 0;
};

// A function template.
template <typename T>
[[dlock::guard("cache:<key>", on_busy=skip)]]
std::optional<T> cached(const std::string& key) {
  return T{};
}

// A member of a class template.
template <typename T>
class Shelf {
 public:
  [[dlock::guard("shelf:<this->id_>")]] T take() { return item_; }

 private:
  long id_ = 0;
  T item_{};
};

// An inline free function.
[[dlock::guard("audit:<day>", wait=0s)]]
inline void audit(int day) {
  (void)day;
}

}  // namespace shop
