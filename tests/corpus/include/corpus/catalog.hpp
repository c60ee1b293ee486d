// Guards defined in a header, in every shape a header holds them: a member defined in its
// class body, a function template, a member of a class template, an inline free function.
// Included by several woven sources of each corpus program.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "corpus/probe.hpp"

namespace corpus {

class Catalog {
 public:
  [[dlock::guard("catalog:<sku>", lease=5s)]] bool add(long sku, const std::string& name) {
    entries_[sku] = name;
    return held_elsewhere("catalog:" + std::to_string(sku));
  }

 private:
  std::map<long, std::string> entries_;
};

template <typename T>
[[dlock::guard("lookup:<id>", on_busy=skip)]]
std::optional<T> lookup(long id) {
  if (!held_elsewhere("lookup:" + std::to_string(id))) return std::nullopt;
  return T{};
}

template <typename T>
class Bin {
 public:
  explicit Bin(long id) : id_(id) {}
  [[dlock::guard("bin:<this->id_>")]] bool put(T item) {
    item_ = std::move(item);
    return held_elsewhere("bin:" + std::to_string(id_));
  }

 private:
  long id_;
  T item_{};
};

[[dlock::guard("audit:<day>", wait=2s)]]
inline bool audit(int day) {
  return held_elsewhere("audit:" + std::to_string(day));
}

/// Calls each of the above with keys distinct per caller.
inline bool use_catalog(long base) {
  Catalog catalog;
  Bin<std::string> bin(base);
  return catalog.add(base, "x") && lookup<int>(base + 1).has_value() && bin.put("y") &&
         audit(static_cast<int>(base + 2));
}

}  // namespace corpus
