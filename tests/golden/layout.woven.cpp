#include <dlock/guard.hpp>
#include <fmt/format.h>
#line 1 "@GOLDEN_DIR@/layout.cpp"
// Layouts of the body's '{', and every option once.
namespace shop {

// The brace on its own line.

void brace_own_line(int x)
{
#line 5 "@GOLDEN_DIR@/layout.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::layout_a", "reports", ::dlock::LockOverrides{::dlock::Millis{250}, ::dlock::Millis{0}, ::dlock::OnBusy::kSkip, ::dlock::Millis{30000}, ::dlock::Millis{3600000}, {}}, true, __FILE__, 5}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("a:{}", (x))); if (!dlock_guard_.entered()) return;
#line 7 "@GOLDEN_DIR@/layout.cpp"

  (void)x;
}

// Code after the brace on the same line keeps its line number.
 int same_line(int x) {
#line 12 "@GOLDEN_DIR@/layout.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::same_line", "reports", ::dlock::LockOverrides{{}, {}, {}, {}, {}, {}}, false, __FILE__, 12}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("b:{}", (x)));
#line 12 "@GOLDEN_DIR@/layout.cpp"
 return x * 2; }

// A comment between the attribute and the function.

// the function comes next
void commented() {
#line 15 "@GOLDEN_DIR@/layout.cpp"
static const ::dlock::GuardSite dlock_guard_site_{"shop::commented", "", ::dlock::LockOverrides{{}, {}, {}, {}, {}, {}}, true, __FILE__, 15}; ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("c")); if (!dlock_guard_.entered()) return;
#line 17 "@GOLDEN_DIR@/layout.cpp"

}

}  // namespace shop
