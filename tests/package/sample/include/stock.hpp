#pragma once
#include <string>

namespace inventory {

struct Item {
  std::string sku;
};

/// Reserves stock of one item; one reservation per item at a time, across processes.
[[dlock::guard("stock:<item.sku>", lease=5s, wait=2s)]]
bool reserve(const Item& item, int count);

}  // namespace inventory
