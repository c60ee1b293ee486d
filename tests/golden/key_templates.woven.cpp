#include <dlock/guard.hpp>
#include <fmt/core.h>
#line 1 "@GOLDEN_DIR@/key_templates.cpp"
// Key templates: placeholders with member chains, literal <, >, { and }, escapes, and
// adjacent literals.
#include <memory>
#include <string>

namespace shop {

struct Customer {
  long id = 0;
};

struct Order {
  Customer customer;
  Customer* referrer = nullptr;
  std::string sku;
};

class Account {
 public:
  // A chain through `this`, and fmt's braces written literally.
   void update() {
#line 21 "@GOLDEN_DIR@/key_templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::Account::update"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 21; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("account:{}:{{settings}}", (this->owner.id))); if (!dlock_guard_.entered()) return;
#line 21 "@GOLDEN_DIR@/key_templates.cpp"
}

  Customer owner;
};

// `->` on a pointer, `.` on a value, `->` through a smart pointer.

void ship(const Order* order) {
#line 27 "@GOLDEN_DIR@/key_templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::ship"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 27; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("customer:{}:{}", (order->customer.id), (order->referrer->id))); if (!dlock_guard_.entered()) return;
#line 28 "@GOLDEN_DIR@/key_templates.cpp"
 (void)order; }

 void price(const Order& order) {
#line 30 "@GOLDEN_DIR@/key_templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::price"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 30; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("sku:{}", (order.sku))); if (!dlock_guard_.entered()) return;
#line 30 "@GOLDEN_DIR@/key_templates.cpp"
 (void)order; }

 void archive(std::unique_ptr<Order> order) {
#line 32 "@GOLDEN_DIR@/key_templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::archive"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 32; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("owned:{}", (order->sku))); if (!dlock_guard_.entered()) return;
#line 32 "@GOLDEN_DIR@/key_templates.cpp"
 (void)order; }

// << and >> are a literal < and >; spaces inside a placeholder are allowed.
 void scan(int lo, int hi) {
#line 35 "@GOLDEN_DIR@/key_templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::scan"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 35; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("range:<{}..{}>", (lo), (hi))); if (!dlock_guard_.entered()) return;
#line 35 "@GOLDEN_DIR@/key_templates.cpp"
 (void)lo; (void)hi; }

// Escapes are kept as their bytes; adjacent literals concatenate.
 void quote(const std::string& name, int n) {
#line 38 "@GOLDEN_DIR@/key_templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::quote"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 38; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("quote:\"{}\"\011tab:{}", (name), (n))); if (!dlock_guard_.entered()) return;
#line 38 "@GOLDEN_DIR@/key_templates.cpp"

  (void)name;
  (void)n;
}

}  // namespace shop
