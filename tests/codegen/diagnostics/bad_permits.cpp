// permits is a whole number from 1 to 1000000.
[[dlock::guard("export:<region>", permits=0)]] void a(int region) { (void)region; }
// CHECK: :[[@LINE-1]]:43: error: 'permits' must be at least 1

[[dlock::guard("export:<region>", permits=-3)]] void b(int region) { (void)region; }
// CHECK: :[[@LINE-1]]:43: error: 'permits' must be at least 1

[[dlock::guard("export:<region>", permits=1000001)]] void c(int region) { (void)region; }
// CHECK: :[[@LINE-1]]:43: error: 'permits' must be at most 1000000

[[dlock::guard("export:<region>", permits=x)]] void d(int region) { (void)region; }
// CHECK: :[[@LINE-1]]:43: error: bad value 'x' for 'permits'; expected a whole number from 1 to 1000000

[[dlock::guard("export:<region>", permits=2.5)]] void e(int region) { (void)region; }
// CHECK: :[[@LINE-1]]:43: error: bad value '2.5' for 'permits'; expected a whole number from 1 to 1000000
