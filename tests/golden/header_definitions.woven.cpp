#include <dlock/guard.hpp>
#include <fmt/core.h>
#line 1 "@GOLDEN_DIR@/header_definitions.cpp"
// Uses guarded functions defined in headers: this file has no guard of its own, yet the
// headers' definitions are compiled here, so the includes point at woven copies.
#include "@HEADERS@/inline_definition.hpp"
#include "@HEADERS@/stock.hpp"

int use_stock() {
  shop::Stock stock;
  shop::Shelf<int> shelf;
  shop::audit(3);
  refresh_everything();
  return stock.reserve(42, 1) + shop::cached<int>("k").value_or(0) + shelf.take();
}
// ---- woven copy @HEADERS@/inline_definition.hpp ----
#line 1 "@GOLDEN_DIR@/include/shop/inline_definition.hpp"
// The definition of a function guarded in another header, inline in a header that does not
// mention dlock::guard: its copy is woven; the guard stays on the declaration.
#pragma once

#include "@GOLDEN_DIR@/include/shop/guarded_declaration.hpp"

inline void refresh_everything() {
#line 4 "@GOLDEN_DIR@/include/shop/guarded_declaration.hpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "refresh_everything"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 4; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("inline")); if (!dlock_guard_.entered()) return;
#line 7 "@GOLDEN_DIR@/include/shop/inline_definition.hpp"
}
// ---- woven copy @HEADERS@/stock.hpp ----
#line 1 "@GOLDEN_DIR@/include/shop/stock.hpp"
// Guards on definitions in a header: woven in a copy of this header for each source that
// includes it, with #line pointing back here.
#pragma once

#include <optional>
#include <string>

namespace shop {

class Stock {
 public:
  // A member defined in its class body.
   int reserve(long sku, int quantity) {
#line 13 "@GOLDEN_DIR@/include/shop/stock.hpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::Stock::reserve"; dlock_site_.attribute.lease = ::dlock::Millis{10000}; dlock_site_.file = __FILE__; dlock_site_.line = 13; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("sku:{}", (sku)));
#line 13 "@GOLDEN_DIR@/include/shop/stock.hpp"

    return quantity + static_cast<int>(sku % 7);
  }

 private:
  int on_hand_ = 0;
};

// A function template.
template <typename T>

std::optional<T> cached(const std::string& key) {
#line 23 "@GOLDEN_DIR@/include/shop/stock.hpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::cached"; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 23; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("cache:{}", (key))); if (!dlock_guard_.entered()) return ::std::nullopt;
#line 24 "@GOLDEN_DIR@/include/shop/stock.hpp"

  return T{};
}

// A member of a class template.
template <typename T>
class Shelf {
 public:
   T take() {
#line 32 "@GOLDEN_DIR@/include/shop/stock.hpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::Shelf::take"; dlock_site_.file = __FILE__; dlock_site_.line = 32; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("shelf:{}", (this->id_)));
#line 32 "@GOLDEN_DIR@/include/shop/stock.hpp"
 return item_; }

 private:
  long id_ = 0;
  T item_{};
};

// An inline free function.

inline void audit(int day) {
#line 40 "@GOLDEN_DIR@/include/shop/stock.hpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::audit"; dlock_site_.attribute.wait = ::dlock::Millis{0}; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 40; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("audit:{}", (day))); if (!dlock_guard_.entered()) return;
#line 41 "@GOLDEN_DIR@/include/shop/stock.hpp"

  (void)day;
}

}  // namespace shop
