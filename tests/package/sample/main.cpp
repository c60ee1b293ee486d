#include <cstdio>

#include "report.hpp"
#include "shelf.hpp"
#include "stock.hpp"

int main() {
  std::printf("%s\n", inventory::report_title().c_str());
  const bool restocked = inventory::restock_all();
  const bool counted = inventory::count_bin(8, 1);
  return inventory::reserve(inventory::Item{"sku-1"}, 3) && restocked && counted ? 0 : 1;
}
