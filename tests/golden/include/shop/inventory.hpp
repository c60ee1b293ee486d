// A header whose guards are woven where the functions are defined (header_declaration.cpp).
#pragma once

#include <string>

namespace shop {

struct Item {
  std::string sku;
};

[[dlock::guard("stock:<item.sku>", lease=10s)]]
int reserve(const Item& item, int quantity);

class Inventory {
 public:
  [[dlock::guard("inventory:<warehouse>", on_busy=skip)]]
  bool restock(int warehouse);

  // Declared, never defined in this test: not woven anywhere here, and not an error.
  [[dlock::guard("inventory:audit")]] void audit();
};

}  // namespace shop
