#pragma once
#include <string>

namespace inventory {
std::string report_title();
bool restock_all();
}
