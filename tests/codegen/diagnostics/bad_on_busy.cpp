// on_busy is throw or skip.
[[dlock::guard("a:<id>", on_busy=skipp)]] void a(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:34: error: bad value 'skipp' for 'on_busy'; did you mean 'skip'?

[[dlock::guard("b:<id>", on_busy=retry)]] void b(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:34: error: bad value 'retry' for 'on_busy'; expected 'throw' or 'skip'
