// A duration is a whole number and a unit: ms, s, m or h.
[[dlock::guard("a:<id>", lease=30)]] void a(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:32: error: bad duration '30' for 'lease': missing unit; write a whole number and a unit: 250ms, 30s, 10m, 1h

[[dlock::guard("b:<id>", wait=2d)]] void b(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:31: error: bad duration '2d' for 'wait': unknown unit 'd'

[[dlock::guard("c:<id>", min_hold=1.5s)]] void c(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:35: error: bad duration '1.5s' for 'min_hold': unknown unit '.5s'

[[dlock::guard("d:<id>", max_hold="10m")]] void d(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:35: error: bad duration '"10m"' for 'max_hold': not a duration

[[dlock::guard("e:<id>", lease=99999999999999999999h)]] void e(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:32: error: bad duration '99999999999999999999h' for 'lease': too large

[[dlock::guard("f:<id>", lease=0s)]] void f(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:32: error: 'lease' must be longer than zero
