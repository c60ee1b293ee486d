// Options are lease, wait, on_busy, min_hold, max_hold, policy and name.
[[dlock::guard("order:<id>", leese=30s)]] void place(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:30: error: unknown option 'leese'; did you mean 'lease'?
// CHECK-NEXT: [[dlock::guard("order:<id>", leese=30s)]] void place(long id)
// CHECK-NEXT:                              ^~~~~
// CHECK-NEXT:                              lease

[[dlock::guard("order:<id>", timeout=30s)]] void ship(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:30: error: unknown option 'timeout'; options are lease, wait, on_busy, min_hold, max_hold, policy, name

[[dlock::guard("order:<id>", onbusy=skip)]] void cancel(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:30: error: unknown option 'onbusy'; did you mean 'on_busy'?
