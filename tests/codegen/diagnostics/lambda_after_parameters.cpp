// After a lambda's parameters, an attribute belongs to the type of its call operator.
auto handler = [](int id) [[dlock::guard("event:<id>")]] { return id; };
// CHECK: :[[@LINE-1]]:29: error: 'guard' attribute cannot be applied to types
// CHECK: :[[@LINE-2]]:36: error: this 'dlock::guard' does not apply to a function declaration
