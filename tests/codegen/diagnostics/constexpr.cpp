// Taking a lock cannot happen at compile time.
[[dlock::guard("square:<x>")]] constexpr int square(int x) { return x * x; }
// CHECK: :[[@LINE-1]]:3: error: a constexpr function cannot be guarded: taking a lock is not a constant expression
