#include <dlock/guard.hpp>
#include <fmt/core.h>
#line 1 "@GOLDEN_DIR@/members.cpp"
// Member functions: static and non-static, in the class body and out of line, const,
// operators, and other attributes sharing the guard's [[...]].
#include <string>

namespace shop {

struct Owner {
  long id = 0;
};

class OrderBook {
 public:
  [[nodiscard]] bool place(long id) {
#line 13 "@GOLDEN_DIR@/members.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::OrderBook::place"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 13; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("book:{}:order:{}", (this->owner.id), (id))); if (!dlock_guard_.entered()) return false;
#line 13 "@GOLDEN_DIR@/members.cpp"

    return id != owner.id;
  }

  // Declared here, defined out of line below: the guard goes with the declaration.
   void cancel(long id);

   int count() const {
#line 20 "@GOLDEN_DIR@/members.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::OrderBook::count"; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kThrow; dlock_site_.file = __FILE__; dlock_site_.line = 20; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("book:count"));
#line 20 "@GOLDEN_DIR@/members.cpp"
 return count_; }

  // Guarded on its out-of-line definition instead.
  static void rebuild(const std::string& reason);

   long operator[](int i) const {
#line 25 "@GOLDEN_DIR@/members.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::OrderBook::operator[]"; dlock_site_.file = __FILE__; dlock_site_.line = 25; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("book:index:{}", (i)));
#line 25 "@GOLDEN_DIR@/members.cpp"
 return owner.id + i; }

   static int stats(int level) {
#line 27 "@GOLDEN_DIR@/members.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::OrderBook::stats"; dlock_site_.file = __FILE__; dlock_site_.line = 27; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("book:stats:{}", (level)));
#line 27 "@GOLDEN_DIR@/members.cpp"
 return level; }

  Owner owner;

 private:
  int count_ = 0;
};

void OrderBook::cancel(long id) {
#line 18 "@GOLDEN_DIR@/members.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::OrderBook::cancel"; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 18; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("book:{}:cancel:{}", (this->owner.id), (id))); if (!dlock_guard_.entered()) return;
#line 35 "@GOLDEN_DIR@/members.cpp"

  count_ -= static_cast<int>(id);
}

// Guarded on the definition only, with the attribute after a first one.
[[maybe_unused]] 
void OrderBook::rebuild(const std::string& reason) {
#line 40 "@GOLDEN_DIR@/members.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::rebuild_all"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 40; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("book:rebuild:{}", (reason))); if (!dlock_guard_.entered()) return;
#line 41 "@GOLDEN_DIR@/members.cpp"

  (void)reason;
}

namespace detail {

struct Journal {
  // The guard first, then another attribute in the same [[...]].
  [[nodiscard]] int append(int entry) {
#line 49 "@GOLDEN_DIR@/members.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::detail::Journal::append"; dlock_site_.file = __FILE__; dlock_site_.line = 49; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("journal:{}", (entry)));
#line 49 "@GOLDEN_DIR@/members.cpp"
 return entry; }
};

}  // namespace detail

}  // namespace shop
