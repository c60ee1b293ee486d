// A consteval function only ever runs in the compiler.
[[dlock::guard("cube:<x>")]] consteval int cube(int x) { return x * x * x; }
// CHECK: :[[@LINE-1]]:3: error: a consteval function cannot be guarded: it runs at compile time
