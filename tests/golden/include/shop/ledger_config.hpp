// Found by ledger.hpp's __has_include, next to it.
#pragma once

namespace shop {
inline constexpr long kLedgerBias = 0;
}
