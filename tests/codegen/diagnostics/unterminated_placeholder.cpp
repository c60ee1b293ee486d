// A '<' opens a placeholder; '<<' is a literal '<'.
[[dlock::guard("order:<id")]] void place(long id) { (void)id; }
// CHECK: :[[@LINE-1]]:23: error: unterminated placeholder in lock key; write '<<' for a literal '<'
