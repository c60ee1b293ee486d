// `this` exists only in non-static member functions.
[[dlock::guard("user:<this->id>")]] void touch() {}
// CHECK: :[[@LINE-1]]:23: error: 'this' cannot be used in the lock key of a free function

struct Registry {
  [[dlock::guard("registry:<this>")]] static void reset() {}
  // CHECK: :[[@LINE-1]]:29: error: 'this' cannot be used in the lock key of a static member function
  long id = 0;
};
