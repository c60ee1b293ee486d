// clang's own errors are reported, and nothing is written.
[[dlock::guard("order:<id>")]] void place(long id) { return id; }
// CHECK: :[[@LINE-1]]:54: error: void function 'place' should not return a value
