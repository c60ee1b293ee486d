// Function templates, members of class templates (in the body and out of line), deduced
// return types and parameter packs.
#include <optional>
#include <string>
#include <utility>

namespace shop {

template <typename Id>
[[dlock::guard("item:<id>")]] void touch(const Id& id) {
  (void)id;
}

template <typename T>
[[dlock::guard("maybe:<key>", on_busy=skip)]] std::optional<T> maybe(int key, T value) {
  if (key < 0) return std::nullopt;
  return value;
}

// A deduced return type: `auto` becomes bool after the body, so skipping returns false.
[[dlock::guard("ready:<n>", on_busy=skip)]] auto ready(int n) {
  return n > 0;
}

// A pack cannot be a placeholder; the other parameters can.
template <typename... Args>
[[dlock::guard("emit:<topic>")]] std::size_t emit(const std::string& topic, Args&&... args) {
  return topic.size() + sizeof...(args);
}

template <typename Key>
class Cache {
 public:
  [[dlock::guard("cache:<key>", lease=5s)]] bool put(const Key& key, int value) {
    last_ = value;
    return key == key;
  }

  [[dlock::guard("cache:<key>:evict")]] void evict(const Key& key);

  // Members through `this` in a template are checked by the compiler of the woven file.
  [[dlock::guard("cache:<this->name>")]] int size() const { return last_; }

  std::string name;

 private:
  int last_ = 0;
};

template <typename Key>
void Cache<Key>::evict(const Key& key) {
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
