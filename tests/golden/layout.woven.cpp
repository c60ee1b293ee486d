#include <dlock/guard.hpp>
#include <fmt/core.h>
#line 1 "@GOLDEN_DIR@/layout.cpp"
// Layouts of the body's '{', and every option once.
namespace shop {

// The brace on its own line.

void brace_own_line(int x)
{
#line 5 "@GOLDEN_DIR@/layout.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::layout_a"; dlock_site_.policy = "reports"; dlock_site_.attribute.lease = ::dlock::Millis{250}; dlock_site_.attribute.wait = ::dlock::Millis{0}; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.attribute.min_hold = ::dlock::Millis{30000}; dlock_site_.attribute.max_hold = ::dlock::Millis{3600000}; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 5; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("a:{}", (x))); if (!dlock_guard_.entered()) return;
#line 7 "@GOLDEN_DIR@/layout.cpp"

  (void)x;
}

// Code after the brace on the same line keeps its line number.
 int same_line(int x) {
#line 12 "@GOLDEN_DIR@/layout.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::same_line"; dlock_site_.policy = "reports"; dlock_site_.file = __FILE__; dlock_site_.line = 12; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("b:{}", (x)));
#line 12 "@GOLDEN_DIR@/layout.cpp"
 return x * 2; }

// A comment between the attribute and the function.

// the function comes next
void commented() {
#line 15 "@GOLDEN_DIR@/layout.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::commented"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 15; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("c")); if (!dlock_guard_.entered()) return;
#line 17 "@GOLDEN_DIR@/layout.cpp"

}

}  // namespace shop
