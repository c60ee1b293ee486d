// Each option at most once.
[[dlock::guard("order:<id>", lease=30s, wait=1s, lease=45s)]] void place(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:50: error: duplicate option 'lease'
// CHECK: :[[@LINE-2]]:30: note: 'lease' first given here

[[dlock::guard("doc:<id>", mode=shared, fair=true, mode=exclusive)]] void render(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:52: error: duplicate option 'mode'
// CHECK: :[[@LINE-2]]:28: note: 'mode' first given here
