// A placeholder must name a parameter; the nearest one is suggested.
[[dlock::guard("order:<idd>")]] void place(long id, int quantity) { (void)id; (void)quantity; }
// CHECK: :[[@LINE-1]]:24: error: unknown parameter 'idd' in lock key; did you mean 'id'?
// CHECK-NEXT: [[dlock::guard("order:<idd>")]] void place(long id, int quantity)
// CHECK-NEXT:                        ^~~
// CHECK-NEXT:                        id

[[dlock::guard("order:<customer>")]] void ship(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:24: error: unknown parameter 'customer' in lock key

[[dlock::guard("order:<id>")]] void nothing() {}
// CHECK: :[[@LINE-1]]:24: error: unknown parameter 'id' in lock key; 'nothing' has no named parameters
