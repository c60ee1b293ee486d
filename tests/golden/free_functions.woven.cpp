#include <dlock/guard.hpp>
#include <fmt/core.h>
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
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::place_order"; dlock_site_.attribute.lease = ::dlock::Millis{30000}; dlock_site_.attribute.wait = ::dlock::Millis{2000}; dlock_site_.file = __FILE__; dlock_site_.line = 14; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("order:{}", (id)));
#line 15 "@GOLDEN_DIR@/free_functions.cpp"

  return Receipt{id + static_cast<long>(note.size())};
}

namespace billing::v2 {

// Overloads share the guard name (the qualified function name) but not the key.

void close_invoice(int id) {
#line 22 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::billing::v2::close_invoice"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 22; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("invoice:{}", (id))); if (!dlock_guard_.entered()) return;
#line 23 "@GOLDEN_DIR@/free_functions.cpp"
 (void)id; }


void close_invoice(const std::string& number) {
#line 25 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::billing::v2::close_invoice"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 25; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("invoice:{}", (number))); if (!dlock_guard_.entered()) return;
#line 26 "@GOLDEN_DIR@/free_functions.cpp"
 (void)number; }

}  // namespace billing::v2

namespace {

// Anonymous namespaces do not show in the guard name.
 bool try_local(int n = 3) noexcept {
#line 33 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::try_local"; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 33; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("local:{}", (n))); if (!dlock_guard_.entered()) return false;
#line 33 "@GOLDEN_DIR@/free_functions.cpp"

  return n > 0;
}

}  // namespace

bool call_local() { return try_local(); }

std::vector<int> g_values{1, 2, 3};

// A reference, a move-only type and std::optional as return types.
 std::vector<int>& values() {
#line 44 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::values"; dlock_site_.file = __FILE__; dlock_site_.line = 44; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("values"));
#line 44 "@GOLDEN_DIR@/free_functions.cpp"
 return g_values; }

 std::unique_ptr<Receipt> make_receipt(std::size_t size) {
#line 46 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::make_receipt"; dlock_site_.file = __FILE__; dlock_site_.line = 46; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("make:{}", (size)));
#line 46 "@GOLDEN_DIR@/free_functions.cpp"

  auto receipt = std::make_unique<Receipt>();
  receipt->order_id = static_cast<long>(size);
  return receipt;
}


std::optional<Receipt> find_receipt(long id) {
#line 52 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::find_receipt"; dlock_site_.attribute.wait = ::dlock::Millis{0}; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 52; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("find:{}", (id))); if (!dlock_guard_.entered()) return ::std::nullopt;
#line 53 "@GOLDEN_DIR@/free_functions.cpp"

  if (id < 0) return std::nullopt;
  return Receipt{id};
}

// The attribute after the declarator-id, and spread over several lines: every line keeps
// its number.
void audit 

 (const char* who) {
#line 60 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::audit"; dlock_site_.attribute.lease = ::dlock::Millis{60000}; dlock_site_.attribute.max_hold = ::dlock::Millis{600000}; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 60; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("audit:{}", (who))); if (!dlock_guard_.entered()) return;
#line 62 "@GOLDEN_DIR@/free_functions.cpp"

  (void)who;
}

// A C-style variadic function: its named parameters can be used.
 int log_line(int level, const char* format, ...) {
#line 67 "@GOLDEN_DIR@/free_functions.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::log_line"; dlock_site_.file = __FILE__; dlock_site_.line = 67; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("log:{}", (level)));
#line 67 "@GOLDEN_DIR@/free_functions.cpp"

  return level + (format ? 1 : 0);
}

}  // namespace shop
