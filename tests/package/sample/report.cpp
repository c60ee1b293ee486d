#include "report.hpp"

namespace inventory {
std::string report_title() { return "inventory"; }
}  // namespace inventory
