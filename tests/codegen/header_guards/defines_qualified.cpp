// Defines a header-guarded member out of line by its qualified name: woven.
#include "api.hpp"

void ns::Cls::f(int id) const { (void)id; }
