// Uses guarded functions defined in headers: this file has no guard of its own, yet the
// headers' definitions are compiled here, so the includes point at woven copies.
#include "shop/inline_definition.hpp"
#include "shop/stock.hpp"

int use_stock() {
  shop::Stock stock;
  shop::Shelf<int> shelf;
  shop::audit(3);
  refresh_everything();
  return stock.reserve(42, 1) + shop::cached<int>("k").value_or(0) + shelf.take();
}
