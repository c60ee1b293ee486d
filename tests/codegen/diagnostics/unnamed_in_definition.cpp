// The key is computed in the definition's body, where the parameter needs a name.
[[dlock::guard("order:<id>")]] void place(long id);
// CHECK: :[[@LINE-1]]:24: error: parameter 'id' of the lock key has no name in the definition
// CHECK: :[[@LINE+1]]:16: note: name the parameter here
void place(long) {}
