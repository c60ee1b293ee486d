// Guarded functions in C++17 code: structured bindings, if constexpr, fold expressions,
// std::variant with std::visit, class template argument deduction, lambdas with captures in
// guarded bodies, and generic lambdas.
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "corpus/catalog.hpp"
#include "corpus/probe.hpp"
#include "corpus/programs.hpp"

namespace corpus {
namespace {

template <typename... Counts>
int sum_all(Counts... counts) {
  return (0 + ... + counts);
}

}  // namespace

[[dlock::guard("ledger:<account>")]]
std::optional<long> balance(const std::string& account, const std::map<std::string, long>& book) {
  long total = 0;
  for (const auto& [name, amount] : book) {
    if constexpr (sizeof(long) >= 8) total += amount;
    else total += amount + static_cast<long>(name.size() * 0);
  }
  if (!held_elsewhere("ledger:" + account)) return std::nullopt;
  return total;
}

[[dlock::guard("shape:<id>", lease=5s, on_busy=skip)]]
bool measure(long id, const std::vector<std::variant<int, double, std::string>>& values) {
  double sum = 0;
  auto add = [&sum](const auto& value) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(value)>>) sum += value;
    else sum += static_cast<double>(value.size());
  };
  for (const auto& value : values) std::visit(add, value);
  const std::tuple pair{id, sum};  // deduced: std::tuple<long, double>
  return std::get<1>(pair) == 6.5 && sum_all(1, 2, 3) == 6 &&
         held_elsewhere("shape:" + std::to_string(std::get<0>(pair)));
}

bool run_classic(long base) {
  const auto total = balance("acct-" + std::to_string(base), {{"a", 3}, {"b", 4}});
  return total == 7 && measure(base, {1, 2.5, std::string("abc")}) && use_catalog(base + 20);
}

}  // namespace corpus
