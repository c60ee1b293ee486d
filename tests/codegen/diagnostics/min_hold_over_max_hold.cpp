// min_hold cannot be longer than max_hold, and max_hold must be positive.
[[dlock::guard("report", min_hold=10m, max_hold=1m)]] void report() {}
// CHECK: :[[@LINE-1]]:35: error: 'min_hold' (10m) is longer than 'max_hold' (1m)
// CHECK: :[[@LINE-2]]:49: note: 'max_hold' given here

[[dlock::guard("export", max_hold=0ms)]] void export_all() {}
// CHECK: :[[@LINE-1]]:35: error: 'max_hold' must be longer than zero
