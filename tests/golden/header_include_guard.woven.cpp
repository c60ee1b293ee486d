#include <dlock/guard.hpp>
#include <fmt/core.h>
#line 1 "@GOLDEN_DIR@/header_include_guard.cpp"
// Includes a header with a classic include guard that defines a guarded function, twice.
#include "@HEADERS@/ledger.hpp"
#include "@HEADERS@/ledger.hpp"

long settle(long account) { return shop::post(account, 100); }
// ---- woven copy @HEADERS@/ledger.hpp ----
#if defined(SHOP_LEDGER_HPP) && !defined(DLOCK_WOVEN_SHOP_LEDGER_HPP)
#error "dlock: @GOLDEN_DIR@/include/shop/ledger.hpp was included before its woven copy, without its guards (through a system header or -include?); include it from project files only"
#endif
#define DLOCK_WOVEN_SHOP_LEDGER_HPP
#line 1 "@GOLDEN_DIR@/include/shop/ledger.hpp"
// A header with a classic include guard and a __has_include of a sibling: in its woven copy
// the test names the sibling by its path, and a check refuses the copy when the original
// was included first (its guard would hide the copy).
#ifndef SHOP_LEDGER_HPP
#define SHOP_LEDGER_HPP

#if __has_include("@GOLDEN_DIR@/include/shop/ledger_config.hpp")
#include "@GOLDEN_DIR@/include/shop/ledger_config.hpp"
#endif

namespace shop {


inline long post(long account, long cents) {
#line 13 "@GOLDEN_DIR@/include/shop/ledger.hpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::post"; dlock_site_.file = __FILE__; dlock_site_.line = 13; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("ledger:{}", (account)));
#line 14 "@GOLDEN_DIR@/include/shop/ledger.hpp"

  return account + cents + kLedgerBias;
}

}  // namespace shop

#endif  // SHOP_LEDGER_HPP
