#include <dlock/guard.hpp>
#include <fmt/core.h>
#line 1 "@GOLDEN_DIR@/templates.cpp"
// Function templates, members of class templates (in the body and out of line), deduced
// return types and parameter packs.
#include <optional>
#include <string>
#include <utility>

namespace shop {

template <typename Id>
 void touch(const Id& id) {
#line 10 "@GOLDEN_DIR@/templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::touch"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 10; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("item:{}", (id))); if (!dlock_guard_.entered()) return;
#line 10 "@GOLDEN_DIR@/templates.cpp"

  (void)id;
}

template <typename T>
 std::optional<T> maybe(int key, T value) {
#line 15 "@GOLDEN_DIR@/templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::maybe"; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 15; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("maybe:{}", (key))); if (!dlock_guard_.entered()) return ::std::nullopt;
#line 15 "@GOLDEN_DIR@/templates.cpp"

  if (key < 0) return std::nullopt;
  return value;
}

// A deduced return type: `auto` becomes bool after the body, so skipping returns false.
 auto ready(int n) {
#line 21 "@GOLDEN_DIR@/templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::ready"; dlock_site_.attribute.on_busy = ::dlock::OnBusy::kSkip; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 21; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("ready:{}", (n))); if (!dlock_guard_.entered()) return false;
#line 21 "@GOLDEN_DIR@/templates.cpp"

  return n > 0;
}

// A pack cannot be a placeholder; the other parameters can.
template <typename... Args>
 std::size_t emit(const std::string& topic, Args&&... args) {
#line 27 "@GOLDEN_DIR@/templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::emit"; dlock_site_.file = __FILE__; dlock_site_.line = 27; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("emit:{}", (topic)));
#line 27 "@GOLDEN_DIR@/templates.cpp"

  return topic.size() + sizeof...(args);
}

template <typename Key>
class Cache {
 public:
   bool put(const Key& key, int value) {
#line 34 "@GOLDEN_DIR@/templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::Cache::put"; dlock_site_.attribute.lease = ::dlock::Millis{5000}; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 34; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("cache:{}", (key))); if (!dlock_guard_.entered()) return false;
#line 34 "@GOLDEN_DIR@/templates.cpp"

    last_ = value;
    return key == key;
  }

   void evict(const Key& key);

  // Members through `this` in a template are checked by the compiler of the woven file.
   int size() const {
#line 42 "@GOLDEN_DIR@/templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::Cache::size"; dlock_site_.file = __FILE__; dlock_site_.line = 42; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("cache:{}", (this->name)));
#line 42 "@GOLDEN_DIR@/templates.cpp"
 return last_; }

  std::string name;

 private:
  int last_ = 0;
};

template <typename Key>
void Cache<Key>::evict(const Key& key) {
#line 39 "@GOLDEN_DIR@/templates.cpp"
static const ::dlock::GuardSite dlock_guard_site_ = [] { ::dlock::GuardSite dlock_site_; dlock_site_.name = "shop::Cache::evict"; dlock_site_.skippable = true; dlock_site_.file = __FILE__; dlock_site_.line = 39; return dlock_site_; }(); ::dlock::Guard dlock_guard_(dlock_guard_site_, ::fmt::format("cache:{}:evict", (key))); if (!dlock_guard_.entered()) return;
#line 51 "@GOLDEN_DIR@/templates.cpp"

  (void)key;
  last_ = 0;
}

inline void use_templates() {
  touch(42);
  (void)maybe(1, std::string("x"));
  (void)ready(1);
  (void)emit("t", 1, 2);
  Cache<std::string> cache;
  (void)cache.put("k", 1);
  cache.evict("k");
  (void)cache.size();
}

}  // namespace shop
