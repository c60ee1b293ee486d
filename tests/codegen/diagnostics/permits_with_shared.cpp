// Every permit is an exclusive hold: permits and mode=shared do not go together.
[[dlock::guard("export:<region>", mode=shared, permits=3)]] void export_report(int region) { (void)region; }
// CHECK: :[[@LINE-1]]:48: error: 'permits' cannot be used with 'mode=shared': every permit is an exclusive hold
// CHECK-NEXT: [[dlock::guard("export:<region>", mode=shared, permits=3)]] void export_report(int region)
// CHECK-NEXT:                                                ^~~~~~~
// CHECK: :[[@LINE-4]]:35: note: 'mode' given here
