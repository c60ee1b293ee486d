// Guards on declarations in a header, definitions here. The definition may name its
// parameters differently: the key uses the definition's names in the body.
#include "shop/inventory.hpp"

namespace shop {

int reserve(const Item& wanted, int quantity) {
  return static_cast<int>(wanted.sku.size()) + quantity;
}

bool Inventory::restock(int warehouse) { return warehouse > 0; }

}  // namespace shop
