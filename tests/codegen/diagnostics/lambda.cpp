// A lambda has no name to guard, and its call operator is not woven.
auto handler = [] [[dlock::guard("event:<id>")]] (int id) { return id; };
// CHECK: :[[@LINE-1]]:21: error: a lambda cannot be guarded; guard a named function and call it from the lambda
