// An order book whose operations on one order never run at the same time, in any process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace shop {

struct Customer {
  std::string name;
};

struct Order {
  long id = 0;
  Customer customer;
  int quantity = 0;
};

struct Receipt {
  long order_id = 0;
  std::uint64_t fencing_token = 0;
};

class OrderBook {
 public:
  explicit OrderBook(std::string journal_path) : journal_path_(std::move(journal_path)) {}

  /// Places an order; waits up to 10 s for another process working on the same order.
  [[dlock::guard("order:<order.id>", lease=5s, wait=10s)]]
  Receipt place(const Order& order);

  /// Ships an order unless someone else is working on it right now (then returns nullopt).
  [[dlock::guard("order:<id>", on_busy=skip, policy="best_effort")]]
  std::optional<Receipt> ship(long id);

  /// Reads an order's status: readers share the order with each other, never with `place`
  /// or `ship`, and a writer that waits goes before readers that come after it.
  [[dlock::guard("order:<id>", mode=shared, lease=5s, wait=10s)]]
  Receipt track(long id);

 private:
  // Records when a hold of `order_id` began ("begin" for a writer, "read" for a reader) and
  // ended, for the overlap check.
  void journal(const char* what, long order_id, std::uint64_t token);

  std::string journal_path_;
};

}  // namespace shop
