#include <dlock/guard.hpp>
#include <fmt/core.h>
#line 1 "@GOLDEN_DIR@/lock_kinds.cpp"
// Lock kinds (DESIGN §7): a shared guard beside an exclusive one on the same key, a fair
// guard, a semaphore of permits, and one guard over two keys.
#include <string>

namespace docs {

struct Patch {
  std::string text;
};


std::string render(long id) {
#line 11 "@GOLDEN_DIR@/lock_kinds.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "docs::render"; dlock_site_.attribute.mode = ::dlock::LockMode::kShared; dlock_site_.file = __FILE__; dlock_site_.line = 11; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("doc:{}", (id)));
#line 12 "@GOLDEN_DIR@/lock_kinds.cpp"
 return std::to_string(id); }


void edit(long id, const Patch& patch) {
#line 14 "@GOLDEN_DIR@/lock_kinds.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "docs::edit"; dlock_site_.attribute.lease = ::dlock::Millis{10000}; dlock_site_.attribute.mode = ::dlock::LockMode::kExclusive; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 14; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("doc:{}", (id))); if (!dlock_guard_.entered()) return;
#line 15 "@GOLDEN_DIR@/lock_kinds.cpp"
 (void)id; (void)patch; }

}  // namespace docs

 void serve(long id) {
#line 19 "@GOLDEN_DIR@/lock_kinds.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "serve"; dlock_site_.attribute.fair = true; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 19; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("ticket:{}", (id))); if (!dlock_guard_.entered()) return;
#line 19 "@GOLDEN_DIR@/lock_kinds.cpp"
 (void)id; }


void export_report(const std::string& region) {
#line 21 "@GOLDEN_DIR@/lock_kinds.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "export_report"; dlock_site_.attribute.wait = ::dlock::Millis{60000}; dlock_site_.attribute.fair = false; dlock_site_.attribute.permits = 3; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 21; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("export:{}", (region))); if (!dlock_guard_.entered()) return;
#line 22 "@GOLDEN_DIR@/lock_kinds.cpp"
 (void)region; }

// Every key or none; the runtime takes them in one order, whatever the order written here.

bool transfer(long from, long to, long cents) {
#line 25 "@GOLDEN_DIR@/lock_kinds.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "transfer"; dlock_site_.attribute.lease = ::dlock::Millis{10000}; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 25; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::std::vector<::dlock::Key>{::fmt::format("account:{}", (from)), ::fmt::format("account:{}", (to))}); if (!dlock_guard_.entered()) return false;
#line 26 "@GOLDEN_DIR@/lock_kinds.cpp"
 return from != to && cents > 0; }
