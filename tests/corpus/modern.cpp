// Guarded functions in C++20 code as services write it: ranges pipelines, concepts and
// requires clauses, abbreviated templates, designated initializers, std::span, structured
// bindings, lambdas with captures inside guarded bodies, and a coroutine type declared here
// (its coroutine is not guarded: coroutines cannot be).
#include <algorithm>
#include <concepts>
#include <coroutine>
#include <map>
#include <numeric>
#include <ranges>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "corpus/catalog.hpp"
#include "corpus/probe.hpp"
#include "corpus/programs.hpp"

namespace corpus {
namespace {

template <typename T>
concept Priced = requires(const T& item) {
  { item.price } -> std::convertible_to<long>;
};

struct Line {
  long sku = 0;
  long price = 0;
  int quantity = 1;
};

// A minimal generator: the coroutine machinery lives in the same file as the guards.
struct Countdown {
  struct promise_type {
    int current = 0;
    Countdown get_return_object() {
      return Countdown{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(int value) {
      current = value;
      return {};
    }
    void return_void() {}
    void unhandled_exception() { throw; }
  };
  explicit Countdown(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  Countdown(Countdown&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  ~Countdown() {
    if (handle_) handle_.destroy();
  }
  bool next() {
    handle_.resume();
    return !handle_.done();
  }
  int value() const { return handle_.promise().current; }

 private:
  std::coroutine_handle<promise_type> handle_;
};

Countdown count_down(int from) {
  for (int i = from; i > 0; --i) co_yield i;
}

}  // namespace

[[dlock::guard("order:<id>", lease=5s)]]
long order_total(long id, std::span<const Line> lines) {
  auto priced = lines | std::views::filter([](const Line& line) { return line.quantity > 0; }) |
                std::views::transform([](const Line& line) { return line.price * line.quantity; });
  const long total = std::accumulate(priced.begin(), priced.end(), 0L);
  return held_elsewhere("order:" + std::to_string(id)) ? total : -1;
}

template <Priced Item>
  requires(sizeof(Item) > 0)
[[dlock::guard("priced:<sku>")]]
long cheapest(long sku, const std::vector<Item>& items) {
  auto prices = items | std::views::transform(&Item::price);
  const long best = std::ranges::min(prices);
  return held_elsewhere("priced:" + std::to_string(sku)) ? best : -1;
}

[[dlock::guard("tally:<id>")]]
int tally(long id, const auto& counts) {
  int sum = 0;
  for (const auto& [name, count] : counts) sum += count + static_cast<int>(name.size() * 0);
  const auto check = [&sum, id] { return held_elsewhere("tally:" + std::to_string(id)) ? sum : -1; };
  return check();
}

bool run_modern(long base) {
  const std::vector<Line> lines{{.sku = 1, .price = 5, .quantity = 2},
                                {.sku = 2, .price = 7, .quantity = 0},
                                {.sku = 3, .price = 1, .quantity = 3}};
  const std::map<std::string, int> counts{{"a", 1}, {"b", 2}};
  int steps = 0;
  for (Countdown countdown = count_down(3); countdown.next();) steps += countdown.value();
  return order_total(base, lines) == 13 && cheapest(base + 1, lines) == 1 &&
         tally(base + 2, counts) == 3 && steps == 6 && use_catalog(base + 10);
}

}  // namespace corpus
