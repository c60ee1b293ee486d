// A deleted function has no body.
[[dlock::guard("legacy")]] void legacy() = delete;
// CHECK: :[[@LINE-1]]:3: error: a deleted function cannot be guarded: it has no body
