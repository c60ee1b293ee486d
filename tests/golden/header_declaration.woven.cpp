#include <dlock/guard.hpp>
#include <fmt/core.h>
#line 1 "@GOLDEN_DIR@/header_declaration.cpp"
// Guards on declarations in a header, definitions here. The definition may name its
// parameters differently: the key uses the definition's names in the body.
#include "shop/inventory.hpp"

namespace shop {

int reserve(const Item& wanted, int quantity) {
#line 12 "@GOLDEN_DIR@/include/shop/inventory.hpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::reserve"; dlock_site_.attribute.lease = ::dlock::Millis{10000}; dlock_site_.file = __FILE__; dlock_site_.line = 12; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("stock:{}", (wanted.sku)));
#line 7 "@GOLDEN_DIR@/header_declaration.cpp"

  return static_cast<int>(wanted.sku.size()) + quantity;
}

bool Inventory::restock(int warehouse) {
#line 17 "@GOLDEN_DIR@/include/shop/inventory.hpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::Inventory::restock"; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 17; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("inventory:{}", (warehouse))); if (!dlock_guard_.entered()) return false;
#line 11 "@GOLDEN_DIR@/header_declaration.cpp"
 return warehouse > 0; }

}  // namespace shop
