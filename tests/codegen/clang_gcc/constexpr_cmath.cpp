// g++ evaluates <cmath> functions in constant expressions (as builtins); Clang does not. The
// generator cannot parse this source, and says where the known disagreements are listed.
#include <cmath>

constexpr double kRoot = std::sqrt(4.0);

[[dlock::guard("k:<id>")]] void f(long id) { (void)id; }
