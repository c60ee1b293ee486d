// EXPECT-STATUS: 1
[[dlock::guard("x", (lease=1s]] void f() {}
