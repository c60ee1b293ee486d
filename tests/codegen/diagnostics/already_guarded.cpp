// One guard per function: two would lock twice.
[[dlock::guard("a")]] void twice();

[[dlock::guard("b")]] void twice() {}
// CHECK: :[[@LINE-1]]:3: error: 'twice' already has a 'dlock::guard'; a function takes one guard
// CHECK: :[[@LINE-4]]:3: note: the first 'dlock::guard' is here
