// Only uses the header-guarded functions: nothing to weave, so no parse.
#include "api.hpp"

int use(const ns::Cls& c, const std::string& name) {
  c.f(1);
  if (ns::g(name)) {
    return 1;
  }
  const bool again = ns::g(name + "x");
  return again && ns::g(name) ? 2 : 0;
}
