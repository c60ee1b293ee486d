// Includes a header with a classic include guard that defines a guarded function, twice.
#include "shop/ledger.hpp"
#include "shop/ledger.hpp"

long settle(long account) { return shop::post(account, 100); }
