// Each key once: the same text after concatenation is the same key.
[[dlock::guard("account:<from>", "account:" "<from>")]] void transfer(long from, long to) { (void)from; (void)to; }
// CHECK: :[[@LINE-1]]:34: error: lock key "account:<from>" is given twice
// CHECK-NEXT: [[dlock::guard("account:<from>", "account:" "<from>")]] void transfer(long from, long to)
// CHECK-NEXT:                                  ^~~~~~~~~~~~~~~~~~
// CHECK: :[[@LINE-4]]:16: note: first given here

// Keys come before the options.
[[dlock::guard("account:<from>", lease=10s, "account:<to>")]] void move(long from, long to) { (void)from; (void)to; }
// CHECK: :[[@LINE-1]]:45: error: a lock key must come before the options
