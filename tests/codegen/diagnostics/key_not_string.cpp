// The key is a string literal, nothing else.
constexpr const char* kKey = "order";
[[dlock::guard(kKey)]] void place() {}
// CHECK: :[[@LINE-1]]:16: error: the lock key must be a string literal, e.g. [[dlock::guard("order:<id>")]]

[[dlock::guard(u8"order")]] void ship() {}
// CHECK: :[[@LINE-1]]:16: error: the lock key must be a plain string literal

[[dlock::guard]] void cancel() {}
// CHECK: :[[@LINE-1]]:15: error: 'dlock::guard' needs a lock key, e.g. [[dlock::guard("order:<id>")]]

[[dlock::guard(lease=30s)]] void refund() {}
// CHECK: :[[@LINE-1]]:16: error: the lock key must be a string literal

[[dlock::guard()]] void restock() {}
// CHECK: :[[@LINE-1]]:16: error: missing lock key; e.g. [[dlock::guard("order:<id>")]]
