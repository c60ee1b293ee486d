#include <cstdio>

#include "report.hpp"
#include "stock.hpp"

int main() {
  std::printf("%s\n", inventory::report_title().c_str());
  return inventory::reserve(inventory::Item{"sku-1"}, 3) ? 0 : 1;
}
