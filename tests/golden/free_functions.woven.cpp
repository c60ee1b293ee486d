#include <dlock/guard.hpp>
#include <fmt/format.h>
#line 1 "@GOLDEN_DIR@/free_functions.cpp"
// Free functions: namespaces (nested, anonymous), overloads, default arguments, noexcept,
// and every kind of return type.
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shop {

struct Receipt {
  long order_id = 0;
};


Receipt place_order(long id, const std::string& note) {
#line 14 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::place_order", "", ::dlock::LockOverrides{::dlock::Millis{30000}, ::dlock::Millis{2000}, {}, {}, {}, {}}, false, __FILE__, 14}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("order:{}", (id)));
#line 15 "@GOLDEN_DIR@/free_functions.cpp"

  return Receipt{id + static_cast<long>(note.size())};
}

namespace billing::v2 {

// Overloads share the guard name (the qualified function name) but not the key.

void close_invoice(int id) {
#line 22 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::billing::v2::close_invoice", "", ::dlock::LockOverrides{{}, {}, {}, {}, {}, {}}, true, __FILE__, 22}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("invoice:{}", (id))); if (!dlock_guard_.entered()) return;
#line 23 "@GOLDEN_DIR@/free_functions.cpp"
 (void)id; }


void close_invoice(const std::string& number) {
#line 25 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::billing::v2::close_invoice", "", ::dlock::LockOverrides{{}, {}, {}, {}, {}, {}}, true, __FILE__, 25}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("invoice:{}", (number))); if (!dlock_guard_.entered()) return;
#line 26 "@GOLDEN_DIR@/free_functions.cpp"
 (void)number; }

}  // namespace billing::v2

namespace {

// Anonymous namespaces do not show in the guard name.
 bool try_local(int n = 3) noexcept {
#line 33 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::try_local", "", ::dlock::LockOverrides{{}, {}, ::dlock::OnBusy::kSkip, {}, {}, {}}, true, __FILE__, 33}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("local:{}", (n))); if (!dlock_guard_.entered()) return false;
#line 33 "@GOLDEN_DIR@/free_functions.cpp"

  return n > 0;
}

}  // namespace

bool call_local() { return try_local(); }

std::vector<int> g_values{1, 2, 3};

// A reference, a move-only type and std::optional as return types.
 std::vector<int>& values() {
#line 44 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::values", "", ::dlock::LockOverrides{{}, {}, {}, {}, {}, {}}, false, __FILE__, 44}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("values"));
#line 44 "@GOLDEN_DIR@/free_functions.cpp"
 return g_values; }

 std::unique_ptr<Receipt> make_receipt(std::size_t size) {
#line 46 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::make_receipt", "", ::dlock::LockOverrides{{}, {}, {}, {}, {}, {}}, false, __FILE__, 46}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("make:{}", (size)));
#line 46 "@GOLDEN_DIR@/free_functions.cpp"

  auto receipt = std::make_unique<Receipt>();
  receipt->order_id = static_cast<long>(size);
  return receipt;
}


std::optional<Receipt> find_receipt(long id) {
#line 52 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::find_receipt", "", ::dlock::LockOverrides{{}, ::dlock::Millis{0}, ::dlock::OnBusy::kSkip, {}, {}, {}}, true, __FILE__, 52}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("find:{}", (id))); if (!dlock_guard_.entered()) return ::std::nullopt;
#line 53 "@GOLDEN_DIR@/free_functions.cpp"

  if (id < 0) return std::nullopt;
  return Receipt{id};
}

// The attribute after the declarator-id, and spread over several lines: every line keeps
// its number.
void audit 

 (const char* who) {
#line 60 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::audit", "", ::dlock::LockOverrides{::dlock::Millis{60000}, {}, {}, {}, ::dlock::Millis{600000}, {}}, true, __FILE__, 60}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("audit:{}", (who))); if (!dlock_guard_.entered()) return;
#line 62 "@GOLDEN_DIR@/free_functions.cpp"

  (void)who;
}

// A C-style variadic function: its named parameters can be used.
 int log_line(int level, const char* format, ...) {
#line 67 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::log_line", "", ::dlock::LockOverrides{{}, {}, {}, {}, {}, {}}, false, __FILE__, 67}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("log:{}", (level)));
#line 67 "@GOLDEN_DIR@/free_functions.cpp"

  return level + (format ? 1 : 0);
}

}  // namespace shop
