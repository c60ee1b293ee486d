// A parameter pack is several values; a placeholder is one.
template <typename... Ids>
[[dlock::guard("batch:<ids>")]] void batch(Ids... ids) { (void)sizeof...(ids); }
// CHECK: :[[@LINE-1]]:24: error: parameter pack 'ids' cannot be used in a lock key; name one value per placeholder
