// Options are lease, wait, on_busy, min_hold, max_hold, policy, name, mode, fair and permits.
[[dlock::guard("order:<id>", leese=30s)]] void place(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:30: error: unknown option 'leese'; did you mean 'lease'?
// CHECK-NEXT: [[dlock::guard("order:<id>", leese=30s)]] void place(long id)
// CHECK-NEXT:                              ^~~~~
// CHECK-NEXT:                              lease

[[dlock::guard("order:<id>", timeout=30s)]] void ship(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:30: error: unknown option 'timeout'; options are lease, wait, on_busy, min_hold, max_hold, policy, name, mode, fair, permits

[[dlock::guard("order:<id>", onbusy=skip)]] void cancel(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:30: error: unknown option 'onbusy'; did you mean 'on_busy'?

[[dlock::guard("doc:<id>", mood=shared)]] void render(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:28: error: unknown option 'mood'; did you mean 'mode'?

[[dlock::guard("ticket:<id>", fiar=true)]] void serve(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:31: error: unknown option 'fiar'; did you mean 'fair'?

[[dlock::guard("export:<region>", permit=3)]] void export_report(int region) { (void)region; }
// CHECK: :[[@LINE-1]]:35: error: unknown option 'permit'; did you mean 'permits'?
// CHECK-NEXT: [[dlock::guard("export:<region>", permit=3)]] void export_report(int region)
// CHECK-NEXT:                                   ^~~~~~
// CHECK-NEXT:                                   permits
