// Only functions can be guarded.
[[dlock::guard("counter")]] int counter = 0;
// CHECK: :[[@LINE-1]]:3: error: 'dlock::guard' applies to functions only; guard the function that does the work

struct [[dlock::guard("type")]] Ledger {};
// CHECK: :[[@LINE-1]]:10: error: 'dlock::guard' applies to functions only

int total(int x) {
  [[dlock::guard("statement")]] return x;
  // CHECK: :[[@LINE-1]]:5: error: 'dlock::guard' applies to functions, not statements
}
