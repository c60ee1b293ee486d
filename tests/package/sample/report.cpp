#include "report.hpp"

#include "shelf.hpp"

namespace inventory {
std::string report_title() { return "inventory"; }
bool restock_all() { return Shelf("north").restock(2) && count_bin(7, 3u); }
}  // namespace inventory
