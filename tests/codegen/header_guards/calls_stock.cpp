// Only calls functions that tests/golden/include/shop/stock.hpp defines with guards: the
// copy of stock.hpp that another source's parse made is used, without a parse, when the
// flags are the same.
#include "shop/stock.hpp"

int use_stock_only() {
  shop::Stock stock;
  return stock.reserve(7, 1);
}
