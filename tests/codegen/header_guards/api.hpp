// Guards on declarations; the functions are defined in the sources that weave them.
#pragma once

#include <string>

namespace ns {

class Cls {
 public:
  [[dlock::guard("cls:<id>")]] void f(int id) const;
};

[[dlock::guard("free:<name>", lease=5s)]]
bool g(const std::string& name);

}  // namespace ns
