// fair is true or false.
[[dlock::guard("ticket:<id>", fair=yes)]] void serve(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:36: error: bad value 'yes' for 'fair'; expected 'true' or 'false'

[[dlock::guard("ticket:<id>", fair=ture)]] void call(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:36: error: bad value 'ture' for 'fair'; did you mean 'true'?
// CHECK-NEXT: [[dlock::guard("ticket:<id>", fair=ture)]] void call(long id)
// CHECK-NEXT:                                    ^~~~
// CHECK-NEXT:                                    true
