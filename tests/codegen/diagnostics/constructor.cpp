// Initializers of bases and members run before the body, outside the lock.
struct Connection {
  [[dlock::guard("connect:<port>")]] explicit Connection(int port) : port_(port) {}
  // CHECK: :[[@LINE-1]]:5: error: a constructor cannot be guarded: its base and member initializers would run outside the lock; guard a function the constructor calls
  [[dlock::guard("disconnect")]] ~Connection() {}
  // CHECK: :[[@LINE-1]]:5: error: a destructor cannot be guarded: members and bases would be destroyed outside the lock; guard a function the destructor calls
  int port_;
};
