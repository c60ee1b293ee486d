// A header with a classic include guard and a __has_include of a sibling: in its woven copy
// the test names the sibling by its path, and a check refuses the copy when the original
// was included first (its guard would hide the copy).
#ifndef SHOP_LEDGER_HPP
#define SHOP_LEDGER_HPP

#if __has_include("ledger_config.hpp")
#include "ledger_config.hpp"
#endif

namespace shop {

[[dlock::guard("ledger:<account>")]]
inline long post(long account, long cents) {
  return account + cents + kLedgerBias;
}

}  // namespace shop

#endif  // SHOP_LEDGER_HPP
