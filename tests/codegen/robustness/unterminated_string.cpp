// EXPECT-STATUS: 1
[[dlock::guard("abc)]] void f() {}
