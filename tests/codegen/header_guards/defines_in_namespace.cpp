// Defines a header-guarded function inside its namespace: woven.
#include "api.hpp"

namespace ns {

bool g(const std::string& name) { return !name.empty(); }

}  // namespace ns
