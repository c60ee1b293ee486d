// mode is shared or exclusive.
[[dlock::guard("doc:<id>", mode=read)]] void render(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:33: error: bad value 'read' for 'mode'; expected 'shared' or 'exclusive'

[[dlock::guard("doc:<id>", mode=exclusiv)]] void edit(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:33: error: bad value 'exclusiv' for 'mode'; did you mean 'exclusive'?
// CHECK-NEXT: [[dlock::guard("doc:<id>", mode=exclusiv)]] void edit(long id)
// CHECK-NEXT:                                 ^~~~~~~~
// CHECK-NEXT:                                 exclusive
